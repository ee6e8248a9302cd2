package storetest

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer is a log destination the ledger writer and a test can share.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Count is how many log lines contain s.
func (b *LogBuffer) Count(s string) int { return strings.Count(b.String(), s) }
