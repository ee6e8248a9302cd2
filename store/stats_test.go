package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestLedgerStats_CountsCommitsAndDrops(t *testing.T) {
	is := is.New(t)
	var (
		mu      sync.Mutex
		commits []LedgerCommit
	)
	s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), Options{
		Now:           newTestClock().Now,
		BatchInterval: time.Hour, // one batch, flushed by Sync
		OnCommit: func(c LedgerCommit) {
			mu.Lock()
			defer mu.Unlock()
			commits = append(commits, c)
		},
	})
	_, k, _ := newAccount(t, s, "acme", "10")
	is.Equal(s.LedgerStats(), LedgerStats{Limit: 4096}) // nothing yet

	s.RecordGeneration(gen(t, "ok-1", k, "1"))
	s.RecordGeneration(gen(t, "ok-1", k, "1"))      // duplicate id: dropped by the database
	s.RecordGeneration(gen(t, "negative", k, "-1")) // dropped before it is queued
	s.RecordGeneration(gen(t, "ok-2", k, "2"))
	is.Equal(s.LedgerStats().Pending, int64(3)) // queued, not committed
	is.NoErr(s.Sync(context.Background()))      // sync

	st := s.LedgerStats()
	is.Equal(st, LedgerStats{Limit: 4096, Committed: 2, Dropped: 2})
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

func TestPools_NameEachPool(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, _ := newTestDB(t, open)
		_, _, _ = newAccount(t, s, "acme", "1")
		writers := 1 // SQLite's one writer connection
		if _, ok := s.(*Postgres); ok {
			writers = pgWritePool // the ledger writer and other writes
		}
		ps := s.Pools()
		is.Equal(len(ps), 3)
		is.Equal(ps[0].Name, "writer")
		is.Equal(ps[0].MaxOpenConnections, writers)
		is.Equal(ps[1].Name, "readers")
		is.Equal(ps[1].MaxOpenConnections, 4) // the default pool
		is.Equal(ps[2].Name, "call_readers")
		is.Equal(ps[2].MaxOpenConnections, 2) // the call path's own
		for _, p := range ps {
			is.True(p.InUse+p.Idle <= p.MaxOpenConnections) // figures read from the pool
		}
	})
}

// Both stores count what their ledger writer commits, for /metrics, and
// tell OnCommit of each commit before Sync returns.
func TestLedgerStats_CountsCommitsOnEitherStore(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		var (
			mu   sync.Mutex
			rows int
		)
		s := open(t, Options{Now: newTestClock().Now, BatchInterval: time.Hour,
			OnCommit: func(c LedgerCommit) {
				mu.Lock()
				defer mu.Unlock()
				if c.Err == nil {
					rows += c.Rows
				}
			}})
		_, k, _ := newAccount(t, s, "acme", "10")
		limit := s.LedgerStats().Limit
		s.RecordGeneration(gen(t, "ok-1", k, "1"))
		s.RecordGeneration(gen(t, "ok-2", k, "2"))
		is.Equal(s.LedgerStats().Pending, int64(2)) // queued, not committed
		is.NoErr(s.Sync(context.Background()))
		is.Equal(s.LedgerStats(), LedgerStats{Limit: limit, Committed: 2})
		mu.Lock()
		defer mu.Unlock()
		is.Equal(rows, 2) // OnCommit saw them committed
	})
}
