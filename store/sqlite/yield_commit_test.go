package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestLedger_BehindCommitsStraight checks that a commit skips its yields
// to waiting calls while another full batch waits beyond it, and yields
// again once the ledger has caught up: at saturation the yields kept the
// writer below the calls' rate until billable calls were refused.
func TestLedger_BehindCommitsStraight(t *testing.T) {
	is := is.New(t)
	const batch = 8
	var (
		mu      sync.Mutex
		skipped []bool
	)
	yieldCommitHook = func(b bool) {
		mu.Lock()
		defer mu.Unlock()
		skipped = append(skipped, b)
	}
	defer func() { yieldCommitHook = nil }()
	gate, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{
		BatchSize: batch, BatchInterval: time.Hour,
		CommitHook: func() error {
			once.Do(func() { close(held); <-gate }) // the first commit waits
			return nil
		},
	})
	_, k, _ := storetest.NewAccount(t, s, "acme", "100")

	record := func(from, n int) {
		for i := range n {
			s.RecordGeneration(storetest.Gen(t, fmt.Sprintf("gen-%d", from+i), k, "0.01"))
		}
	}
	record(0, batch)
	<-held // the first batch is in its commit, having yielded as it went
	mu.Lock()
	before := len(skipped)
	is.True(before > 0)
	for _, b := range skipped {
		is.True(!b) // nothing waited beyond it
	}
	mu.Unlock()
	record(batch, 3*batch) // three batches wait behind it
	close(gate)
	is.NoErr(s.Sync(context.Background()))

	mu.Lock()
	defer mu.Unlock()
	after := skipped[before:]
	// The rest of the first commit and all of the next two ran with a full
	// batch waiting beyond them; the last had nothing behind it.
	perCommit := before + 1 // the first commit's yields, and the one before its COMMIT
	is.Equal(len(after), 1+3*perCommit)
	for i, b := range after {
		is.Equal(b, i < 1+2*perCommit) // skipped while behind
	}
}
