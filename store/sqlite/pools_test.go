package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestCallPath_NeverWaitsForAccountReaders holds every connection of the
// account readers' pool in a read transaction, as a flood of usage reports
// would, and checks that the call path's reads (a key not in the cache, a
// budget, spend) still answer: they use their own pool.
func TestCallPath_NeverWaitsForAccountReaders(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	// 4 account readers, and no cache of keys: authenticating reads the
	// key on the call path.
	s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{Now: storetest.NewClock().Now, AuthCacheTTL: -1})
	a, k, secret := storetest.NewAccount(t, s, "acme", "10")
	s.RecordGeneration(storetest.Gen(t, "g1", k, "0.5"))
	is.NoErr(s.Sync(ctx))
	// A second key, charged by another Store (another process), so that
	// this one has to load its spend from the database.
	_, k2, err := s.CreateKey(ctx, a.ID, "second")
	is.NoErr(err)
	other := openTestStore(t, s.path, store.Options{Now: s.Now})
	other.RecordGeneration(storetest.Gen(t, "g2", k2, "0.25"))
	is.NoErr(other.Close())

	var held []func() error
	for range 4 {
		tx, err := s.r.BeginTx(ctx, nil)
		is.NoErr(err)
		var n int
		is.NoErr(tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM generations`).Scan(&n)) // holds its connection
		held = append(held, tx.Rollback)
	}
	// An account read now waits for a connection: proof the pool is held.
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.AccountByID(waitCtx, a.ID)
	cancel()
	is.True(errors.Is(err, context.DeadlineExceeded)) // the account pool is exhausted

	// The call path does not wait. Its deadline is only there so that a
	// regression fails instead of hanging.
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := s.Authenticate(callCtx, secret)
	is.NoErr(err) // authenticated
	is.Equal(got.ID, k.ID)
	b, err := s.Budget(callCtx, a.ID)
	is.NoErr(err) // budget read
	is.Equal(b.Credits, int64(10_000_000))
	sp, err := s.Spend(callCtx, a.ID, k2.ID, s.Now())
	is.NoErr(err)                           // the key's spend loaded
	is.Equal(sp.KeyDay, int64(250_000))     // from the database
	is.Equal(sp.AccountDay, int64(500_000)) // the account's was loaded before the other store charged it
	for _, rollback := range held {
		is.NoErr(rollback())
	}
}

// The account readers' connections close once idle for ReaderIdleTime (and
// a read after that opens one again); the call path's stay open.
func TestReaders_ClosedWhenIdle(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{ReaderIdleTime: 50 * time.Millisecond, AuthCacheTTL: -1}) // no cache of keys: authenticating reads
	a, _, secret := storetest.NewAccount(t, s, "acme", "10")
	_, err := s.Authenticate(ctx, secret) // a call-path read
	is.NoErr(err)
	// Two reports at once: two connections of the account pool.
	var held []func() error
	for range 2 {
		tx, err := s.r.BeginTx(ctx, nil)
		is.NoErr(err)
		var n int
		is.NoErr(tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM generations`).Scan(&n))
		held = append(held, tx.Rollback)
	}
	is.Equal(s.r.Stats().OpenConnections, 2) // both reports' connections
	for _, rollback := range held {
		is.NoErr(rollback())
	}
	calls := s.call.Stats().OpenConnections
	is.True(calls >= 1) // the call path's connection

	deadline := time.Now().Add(10 * time.Second)
	for s.r.Stats().OpenConnections > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := s.r.Stats()
	is.Equal(st.OpenConnections, 0)                 // idle account readers closed
	is.True(st.MaxIdleTimeClosed >= 2)              // by their idle time (and Open's, if it idled first)
	is.Equal(s.call.Stats().OpenConnections, calls) // the call path's left open

	got, err := s.AccountByID(ctx, a.ID) // opens one again
	is.NoErr(err)
	is.Equal(got.Name, "acme")
}

// The call path's readers have a page cache of callReaderCacheKiB; the
// account readers keep SQLite's default.
func TestCallReaders_SmallCache(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	ctx := context.Background()
	var call, account int
	is.NoErr(s.call.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&call))
	is.Equal(call, -callReaderCacheKiB) // the call path's
	is.NoErr(s.r.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&account))
	is.Equal(account, -2000) // the account readers'
}

// By default the account readers close after DefaultReaderIdleTime; a
// negative ReaderIdleTime keeps them open (0 is database/sql's "no limit").
func TestReaders_IdleTimeDefault(t *testing.T) {
	is := is.New(t)
	is.Equal(readerIdleTime(store.Options{}), DefaultReaderIdleTime)
	is.Equal(readerIdleTime(store.Options{ReaderIdleTime: -1}), time.Duration(0))
	is.Equal(readerIdleTime(store.Options{ReaderIdleTime: time.Hour}), time.Hour)
}

// TestReads_InterruptedByContext checks what the account endpoints' time
// limit relies on: modernc.org/sqlite interrupts a running statement when
// its context ends (sqlite3_interrupt), instead of running it to the end.
// The statement below would count for hours; the deadline only bounds the
// test if interruption is broken.
func TestReads_InterruptedByContext(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var n int64
	done := make(chan error, 1)
	go func() {
		done <- s.r.QueryRowContext(ctx,
			`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000000) SELECT COUNT(*) FROM c`).Scan(&n)
	}()
	select {
	case err := <-done:
		is.True(err != nil) // interrupted, not finished
	case <-time.After(time.Minute):
		t.Fatal("the statement was not interrupted when its context ended")
	}
	// The connection is usable afterwards.
	var one int
	is.NoErr(s.r.QueryRowContext(context.Background(), `SELECT 1`).Scan(&one))
	is.Equal(one, 1)
}
