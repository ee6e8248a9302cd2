package cli

import (
	"bufio"
	"context"
	"io"
	"sync"
	"time"
)

// logFlushInterval is the longest a log line waits in logWriter's buffer.
const logFlushInterval = 100 * time.Millisecond

// logWriter buffers log output and flushes it every logFlushInterval (or
// when 64 KiB are waiting), so the access log costs one write syscall per
// batch of lines instead of one per request — a measurable share of a
// call's CPU at thousands of calls per second. A line is at most 100 ms
// late; Close flushes the rest, and only a kill -9 can lose the last
// 100 ms of log.
type logWriter struct {
	mu   sync.Mutex
	bw   *bufio.Writer
	stop context.CancelFunc
	done chan struct{}
}

// newLogWriter starts the flusher; Close stops it and flushes.
func newLogWriter(w io.Writer) *logWriter {
	ctx, cancel := context.WithCancel(context.Background())
	lw := &logWriter{bw: bufio.NewWriterSize(w, 64<<10), stop: cancel, done: make(chan struct{})}
	go lw.run(ctx)
	return lw
}

func (lw *logWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.bw.Write(p)
}

func (lw *logWriter) flush() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	_ = lw.bw.Flush()
}

func (lw *logWriter) run(ctx context.Context) {
	defer close(lw.done)
	t := time.NewTicker(logFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			lw.flush()
		case <-ctx.Done():
			lw.flush()
			return
		}
	}
}

// Close stops the flusher and writes out what is buffered.
func (lw *logWriter) Close() error {
	lw.stop()
	<-lw.done
	return nil
}
