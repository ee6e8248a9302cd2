package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// fault is a switchable ledger fault, installed as Options.CommitHook.
type fault struct {
	on    atomic.Bool
	calls atomic.Int64 // commits attempted while on
}

var errInjected = errors.New("injected: disk I/O error")

func (f *fault) hook() error {
	if !f.on.Load() {
		return nil
	}
	f.calls.Add(1)
	return errInjected
}

// faultyStore opens a store whose commits fail while f is on, logging to
// logs, with short retry waits.
func faultyStore(t *testing.T, f *fault, logs *storetest.LogBuffer, opts store.Options) (*Store, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock()
	opts.Now = clock.Now
	opts.CommitHook = f.hook
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if opts.RetryInterval == 0 {
		opts.RetryInterval = 20 * time.Millisecond
	}
	return openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), opts), clock
}

// waitFor polls cond until it holds, or fails the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countRows is the number of generation rows committed.
func countRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM generations`).Scan(&n); err != nil {
		t.Fatalf("count generations: %v", err)
	}
	return n
}

func TestLedger_FailingWritesAreHeldCountedAndRetried(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var f fault
	var logs storetest.LogBuffer
	s, clock := faultyStore(t, &f, &logs, store.Options{})
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")
	s.RecordGeneration(storetest.Gen(t, "before", k, "1"))
	is.NoErr(s.Sync(ctx)) // a healthy ledger commits
	is.NoErr(s.CheckLedger())
	is.True(s.Health(ctx).Ready()) // ready

	f.on.Store(true)
	const n = 300 // more than a batch
	for i := range n {
		s.RecordGeneration(storetest.Gen(t, "held-"+strconv.Itoa(i), k, "0.01"))
	}
	err := s.Sync(ctx)
	is.True(errors.Is(err, store.ErrUnavailable)) // Sync does not wait for a failing ledger
	is.True(strings.Contains(err.Error(), "failing since"))
	err = s.CheckLedger()
	is.True(errors.Is(err, store.ErrUnavailable)) // billable calls are refused
	for range 9 {
		is.True(s.CheckLedger() != nil)
	}
	h := s.Health(ctx)
	is.True(!h.Ready())                                // not ready
	is.NoErr(h.Database)                               // reads still answer
	is.True(errors.Is(h.Ledger, store.ErrUnavailable)) // the ledger is what fails
	is.Equal(h.Pending, int64(n))                      // every generation is held
	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(1_000_000+n*10_000)) // held charges still count
	is.Equal(sp.KeyDay, int64(1_000_000+n*10_000))
	waitFor(t, "retries", func() bool { return f.calls.Load() >= 3 }) // it keeps retrying
	is.Equal(countRows(t, s), 1)                                      // nothing committed meanwhile
	is.Equal(logs.Count("ledger cannot record generations"), 1)       // one line per incident
	is.Equal(logs.Count("generation dropped"), 0)                     // nothing dropped

	f.on.Store(false)
	waitFor(t, "recovery", func() bool { return !s.LedgerStats().Failing })
	is.NoErr(s.Sync(ctx))          // everything recorded
	is.Equal(countRows(t, s), n+1) // every generation has its row
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(acct.Balance.String(), "6.000000")   // 10 − 1 − 300 × 0.01
	is.Equal(acct.TotalUsed.String(), "4.000000") // charged exactly once each
	storetest.CheckLedger(t, s)
	sp, err = s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(4_000_000)) // memory and database agree
	is.True(s.Health(ctx).Ready())       // ready again
	is.Equal(logs.Count("ledger cannot record generations"), 1)
	waitFor(t, "the recovery line", func() bool { return logs.Count("ledger recovered") == 1 })
	is.True(strings.Contains(logs.String(), "refused=10"))                // the calls refused
	is.True(strings.Contains(logs.String(), "held_max="+strconv.Itoa(n))) // and the generations held
	is.Equal(logs.Count("level=ERROR"), 1)                                // and nothing else at Error
}

func TestLedger_OnlyUnstorableRowsAreDroppedAfterARecovery(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var f fault
	var logs storetest.LogBuffer
	s, _ := faultyStore(t, &f, &logs, store.Options{BatchInterval: time.Hour})
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")

	f.on.Store(true)
	s.RecordGeneration(storetest.Gen(t, "ok-1", k, "1"))
	s.RecordGeneration(storetest.Gen(t, "ok-1", k, "1")) // a duplicate id: a bug, never storable
	s.RecordGeneration(storetest.Gen(t, "ok-2", k, "2"))
	is.True(errors.Is(s.Sync(ctx), store.ErrUnavailable)) // the Sync flushes, and fails
	f.on.Store(false)
	waitFor(t, "recovery", func() bool { return s.Pending() == 0 })
	is.NoErr(s.Sync(ctx))

	is.Equal(countRows(t, s), 2)
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(acct.Balance.String(), "7.000000") // the duplicate is not charged
	storetest.CheckLedger(t, s)
	is.Equal(logs.Count("generation dropped"), 1) // the duplicate, loudly
	is.True(strings.Contains(logs.String(), "generation_id=ok-1"))
	sp, err := s.Spend(ctx, a.ID, "", time.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(3_000_000)) // and taken back from spend
}

// TestLedger_RecordNeverBlocks: with the database failing, recording far
// more than QueueSize generations returns at once; CheckLedger says the
// ledger is failing, and the held rows all reach the database later.
func TestLedger_RecordNeverBlocks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var f fault
	var logs storetest.LogBuffer
	s, _ := faultyStore(t, &f, &logs, store.Options{QueueSize: 16})
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000")

	f.on.Store(true)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			s.RecordGeneration(storetest.Gen(t, "g-"+strconv.Itoa(i), k, "0.001"))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RecordGeneration blocked on a failing ledger")
	}
	err := s.CheckLedger()
	is.True(errors.Is(err, store.ErrUnavailable))
	f.on.Store(false)
	waitFor(t, "recovery", func() bool { return !s.LedgerStats().Failing })
	is.NoErr(s.Sync(ctx))
	is.Equal(countRows(t, s), n)
	storetest.CheckLedger(t, s)
}

// TestLedger_BackedUp: more than QueueSize generations waiting makes
// CheckLedger refuse, even while commits succeed, until they are in.
func TestLedger_BackedUp(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var f fault
	var logs storetest.LogBuffer
	// Commits happen only on Sync or a full batch: the queue backs up.
	s, _ := faultyStore(t, &f, &logs, store.Options{QueueSize: 10, BatchSize: 1000, BatchInterval: time.Hour})
	_, k, _ := storetest.NewAccount(t, s, "acme", "10")
	for i := range 10 {
		s.RecordGeneration(storetest.Gen(t, "g-"+strconv.Itoa(i), k, "0.01"))
	}
	is.NoErr(s.CheckLedger()) // at the limit: still admitting
	s.RecordGeneration(storetest.Gen(t, "g-10", k, "0.01"))
	err := s.CheckLedger()
	is.True(errors.Is(err, store.ErrUnavailable))
	is.True(strings.Contains(err.Error(), "backed up: 11 generations"))
	is.NoErr(s.Sync(ctx)) // commits them
	is.NoErr(s.CheckLedger())
	waitFor(t, "the recovery line", func() bool { return logs.Count("ledger recovered") == 1 })
	is.Equal(logs.Count("ledger cannot record generations"), 1)
	storetest.CheckLedger(t, s)
}

// TestLedger_CloseWhileFailing: Close keeps trying for CloseTimeout, then
// logs every generation it could not record, with what a reconciliation by
// hand needs, and says how many in its error.
func TestLedger_CloseWhileFailing(t *testing.T) {
	is := is.New(t)
	var f fault
	var logs storetest.LogBuffer
	s, _ := faultyStore(t, &f, &logs, store.Options{CloseTimeout: 300 * time.Millisecond})
	_, k, _ := storetest.NewAccount(t, s, "acme", "10")
	s.RecordGeneration(storetest.Gen(t, "saved", k, "1"))
	is.NoErr(s.Sync(context.Background()))

	f.on.Store(true)
	for i := range 5 {
		s.RecordGeneration(storetest.Gen(t, "lost-"+strconv.Itoa(i), k, "0.5"))
	}
	start := time.Now()
	err := s.Close()
	took := time.Since(start)
	is.True(errors.Is(err, store.ErrUnavailable))                                 // Close says so
	is.True(strings.Contains(err.Error(), "5 generations could not be recorded")) // and how many
	is.True(took >= 250*time.Millisecond && took < 5*time.Second)                 // after trying for CloseTimeout
	is.Equal(logs.Count("generation not recorded"), 5)                            // one line each
	for i := range 5 {
		is.True(strings.Contains(logs.String(), "generation_id=lost-"+strconv.Itoa(i)+" "))
	}
	is.True(strings.Contains(logs.String(), "cost_micros=500000"))    // enough to enter it by hand
	is.True(strings.Contains(logs.String(), "created_at=2025-03-10")) // …when
	is.True(strings.Contains(logs.String(), "account_id=1"))          // …whose
}

// TestLedger_CloseRecoversInTime: a fault that clears during Close's
// window loses nothing.
func TestLedger_CloseRecoversInTime(t *testing.T) {
	is := is.New(t)
	var f fault
	var logs storetest.LogBuffer
	path := filepath.Join(t.TempDir(), "svcgw.db")
	clock := storetest.NewClock()
	s := openTestStore(t, path, store.Options{Now: clock.Now, CommitHook: f.hook, RetryInterval: 20 * time.Millisecond,
		CloseTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, k, _ := storetest.NewAccount(t, s, "acme", "10")
	f.on.Store(true)
	for i := range 5 {
		s.RecordGeneration(storetest.Gen(t, "g-"+strconv.Itoa(i), k, "0.5"))
	}
	time.AfterFunc(200*time.Millisecond, func() { f.on.Store(false) })
	is.NoErr(s.Close()) // everything committed before the deadline
	is.Equal(logs.Count("generation not recorded"), 0)

	s2 := openTestStore(t, path, store.Options{Now: clock.Now})
	is.Equal(countRows(t, s2), 5)
	storetest.CheckLedger(t, s2)
}

// TestLedger_WriteLockHeldByAnotherConnection: another connection holding
// the database's write lock (BEGIN IMMEDIATE, as a second process would)
// makes commits time out. They are retried, never dropped; CheckLedger and
// Sync answer within CommitTimeout instead of hanging; reads still work;
// once the lock is released everything is recorded.
func TestLedger_WriteLockHeldByAnotherConnection(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var logs storetest.LogBuffer
	path := filepath.Join(t.TempDir(), "svcgw.db")
	clock := storetest.NewClock()
	s := openTestStore(t, path, store.Options{Now: clock.Now, CommitTimeout: 300 * time.Millisecond,
		RetryInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a, k, secret := storetest.NewAccount(t, s, "acme", "10")

	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	is.NoErr(err)
	defer other.Close()
	conn, err := other.Conn(ctx)
	is.NoErr(err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	is.NoErr(err) // the other connection holds the write lock

	for i := range 20 {
		s.RecordGeneration(storetest.Gen(t, "g-"+strconv.Itoa(i), k, "0.1"))
	}
	start := time.Now()
	err = s.Sync(ctx)
	is.True(errors.Is(err, store.ErrUnavailable)) // no hang: an answer
	is.True(time.Since(start) < 3*time.Second)
	err = s.CheckLedger()
	is.True(errors.Is(err, store.ErrUnavailable))
	t.Logf("while locked: %v", err)
	_, err = s.Authenticate(ctx, secret)
	is.NoErr(err) // WAL readers do not wait for the lock
	_, err = s.Budget(ctx, a.ID)
	is.NoErr(err)
	is.Equal(logs.Count("ledger cannot record generations"), 1)

	_, err = conn.ExecContext(ctx, "ROLLBACK")
	is.NoErr(err) // the other connection lets go
	waitFor(t, "recovery", func() bool { return !s.LedgerStats().Failing })
	is.NoErr(s.Sync(ctx))
	is.Equal(countRows(t, s), 20)
	is.Equal(logs.Count("generation dropped"), 0)
	waitFor(t, "the recovery line", func() bool { return logs.Count("ledger recovered") == 1 })
	storetest.CheckLedger(t, s)
}

// TestStore_ReadsAreBoundedByQueryTimeout: a read on a request's path that
// cannot get the database in time (here every reader connection of both
// pools is taken) fails with ErrUnavailable after QueryTimeout instead of
// hanging.
func TestStore_ReadsAreBoundedByQueryTimeout(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{QueryTimeout: 200 * time.Millisecond, AuthCacheTTL: -1, Readers: 2, CallReaders: 2})
	a, k, secret := storetest.NewAccount(t, s, "acme", "10")

	var held []*sql.Conn
	for _, pool := range []*sql.DB{s.r, s.call} {
		for range 2 {
			c, err := pool.Conn(ctx)
			is.NoErr(err)
			held = append(held, c)
		}
	}
	reads := map[string]func() error{
		"authenticate": func() error { _, err := s.Authenticate(ctx, secret); return err },
		"budget":       func() error { _, err := s.Budget(ctx, a.ID); return err },
		"spend":        func() error { _, err := s.Spend(ctx, a.ID, k.ID, time.Now()); return err },
		"account":      func() error { _, err := s.AccountByID(ctx, a.ID); return err },
		"generation":   func() error { _, err := s.Generation(ctx, a.ID, "x"); return err },
	}
	for name, read := range reads {
		start := time.Now()
		err := read()
		took := time.Since(start)
		if !errors.Is(err, store.ErrUnavailable) || took > 3*time.Second {
			t.Errorf("%s: %v after %s, want ErrUnavailable after about 200ms", name, err, took)
		}
	}
	h := s.Health(ctx)
	is.True(errors.Is(h.Database, store.ErrUnavailable)) // readiness names the database
	is.NoErr(h.Ledger)
	t.Logf("health: %v", h.Database)

	// A caller's own cancellation is not the database's fault.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Budget(cctx, a.ID)
	is.True(errors.Is(err, context.Canceled) && !errors.Is(err, store.ErrUnavailable))

	for _, c := range held {
		is.NoErr(c.Close())
	}
	for name, read := range reads {
		if err := read(); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after the readers are back: %v", name, err)
		}
	}
	is.True(s.Health(ctx).Ready())
}

// TestFeedback_BoundedWhileAnotherProcessHoldsTheWriteLock: feedback
// writes wait for the write lock no longer than QueryTimeout.
func TestFeedback_BoundedWhileAnotherProcessHoldsTheWriteLock(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{QueryTimeout: 200 * time.Millisecond})
	a, k, _ := storetest.NewAccount(t, s, "acme", "10")
	s.RecordGeneration(storetest.Gen(t, "g-1", k, "0.1"))
	is.NoErr(s.Sync(ctx))

	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	is.NoErr(err)
	defer other.Close()
	conn, err := other.Conn(ctx)
	is.NoErr(err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	is.NoErr(err)

	start := time.Now()
	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "g-1", Rating: "up"}, time.Hour)
	is.True(errors.Is(err, store.ErrUnavailable)) // unavailable, not a hang
	is.True(time.Since(start) < 3*time.Second)

	_, err = conn.ExecContext(ctx, "ROLLBACK")
	is.NoErr(err)
	_, err = s.UpsertFeedback(ctx, a.ID, store.Feedback{ID: "g-1", Rating: "up"}, time.Hour)
	is.NoErr(err)
}
