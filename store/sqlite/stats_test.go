package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

func TestLedgerStats_CountsCommitsAndDrops(t *testing.T) {
	is := is.New(t)
	var (
		mu      sync.Mutex
		commits []store.LedgerCommit
	)
	s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{
		Now:           storetest.NewClock().Now,
		BatchInterval: time.Hour, // one batch, flushed by Sync
		OnCommit: func(c store.LedgerCommit) {
			mu.Lock()
			defer mu.Unlock()
			commits = append(commits, c)
		},
	})
	_, k, _ := storetest.NewAccount(t, s, "acme", "10")
	is.Equal(s.LedgerStats(), store.LedgerStats{Limit: 4096}) // nothing yet

	s.RecordGeneration(storetest.Gen(t, "ok-1", k, "1"))
	s.RecordGeneration(storetest.Gen(t, "ok-1", k, "1"))      // duplicate id: dropped by the database
	s.RecordGeneration(storetest.Gen(t, "negative", k, "-1")) // dropped before it is queued
	s.RecordGeneration(storetest.Gen(t, "ok-2", k, "2"))
	is.Equal(s.LedgerStats().Pending, int64(3)) // queued, not committed
	is.NoErr(s.Sync(context.Background()))      // sync

	st := s.LedgerStats()
	is.Equal(st, store.LedgerStats{Limit: 4096, Committed: 2, Dropped: 2})
	mu.Lock()
	defer mu.Unlock()
	// The batch of three failed on the duplicate and was committed row by
	// row: one failed attempt of 3 rows, then 1 + 1 committed and 1 failed.
	is.Equal(len(commits), 4)
	is.Equal(commits[0].Rows, 3)
	is.True(commits[0].Err != nil) // the batch
	ok := 0
	for _, c := range commits[1:] {
		is.Equal(c.Rows, 1)
		is.True(c.Duration > 0) // timed
		if c.Err == nil {
			ok++
		}
	}
	is.Equal(ok, 2) // the two good rows
}
