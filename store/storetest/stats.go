package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

func testPools_NameEachPool(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	_, _, _ = NewAccount(t, s, "acme", "1")
	writers := 1 // SQLite's one writer connection
	if engine(t, s).Dialect().Name == "postgres" {
		writers = 2 // the ledger writer and other writes
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
}

// Both stores count what their ledger writer commits, for /metrics, and
// tell OnCommit of each commit before Sync returns.
func testLedgerStats_CountsCommitsOnEitherStore(t *testing.T, open Opener) {
	is := is.New(t)
	var (
		mu   sync.Mutex
		rows int
	)
	s := open(t, store.Options{Now: NewClock().Now, BatchInterval: time.Hour,
		OnCommit: func(c store.LedgerCommit) {
			mu.Lock()
			defer mu.Unlock()
			if c.Err == nil {
				rows += c.Rows
			}
		}})
	_, k, _ := NewAccount(t, s, "acme", "10")
	limit := s.LedgerStats().Limit
	s.RecordGeneration(Gen(t, "ok-1", k, "1"))
	s.RecordGeneration(Gen(t, "ok-2", k, "2"))
	is.Equal(s.LedgerStats().Pending, int64(2)) // queued, not committed
	is.NoErr(s.Sync(context.Background()))
	is.Equal(s.LedgerStats(), store.LedgerStats{Limit: limit, Committed: 2})
	mu.Lock()
	defer mu.Unlock()
	is.Equal(rows, 2) // OnCommit saw them committed
}
