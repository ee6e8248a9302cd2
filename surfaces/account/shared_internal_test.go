package account

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

// pendingLedger is a store whose ledger has calls pending until a Sync
// commits them; only what syncGate uses is implemented.
type pendingLedger struct {
	store.DB
	pending   atomic.Int64
	committed chan time.Time // when each SyncWithin's commit was done
}

func (l *pendingLedger) LedgerStats() store.LedgerStats {
	return store.LedgerStats{Pending: l.pending.Load()}
}

func (l *pendingLedger) SyncWithin(ctx context.Context, d time.Duration) error {
	l.pending.Store(0)
	l.committed <- time.Now()
	return nil
}

// The reads that waited for a commit start Limits.Settle after it, so the
// calls queued behind the commit go first; with nothing pending a read
// does not wait at all.
func TestSyncGate_ReadsSettleAfterTheirCommit(t *testing.T) {
	is := is.New(t)
	l := &pendingLedger{committed: make(chan time.Time, 1)}
	g := &syncGate{st: l, every: time.Millisecond, settle: 50 * time.Millisecond, limit: 10 * time.Second}

	is.NoErr(g.sync(context.Background()))
	is.Equal(len(l.committed), 0) // nothing pending: no commit waited for, so no pause either

	l.pending.Store(3)
	is.NoErr(g.sync(context.Background()))
	released := time.Now()
	committed := <-l.committed
	is.True(released.Sub(committed) >= 50*time.Millisecond) // the read started a settle after the commit

	// A negative Settle means none; 0 the default.
	is.Equal(Limits{Settle: -1}.withDefaults().Settle, time.Duration(0))
	is.Equal(Limits{}.withDefaults().Settle, DefaultSettle)
}
