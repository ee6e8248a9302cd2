package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// Gen returns a generation of the account's key costing cost.
func Gen(t testing.TB, id string, k store.Key, cost string) store.Generation {
	return store.Generation{
		ID: id, AccountID: k.AccountID, KeyID: k.ID,
		Application: "app", Surface: "chat", Model: "svc-fusion",
		RequestType: "pro", Tier: "medium", FinishReason: "stop",
		PromptTokens: 100, CompletionTokens: 20, CachedPromptTokens: 40, ReasoningTokens: 5,
		Cost: Micros(t, cost), LatencyMS: 300, GenerationTimeMS: 250,
	}
}

// Micros is the amount s, which must be a whole number of micro-dollars.
func Micros(t testing.TB, s string) money.Micros {
	t.Helper()
	m, err := money.FromDecimal(Dec(t, s))
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return m
}

func testRecordGeneration_SyncReadsYourWrites(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k, _ := NewAccount(t, s, "acme", "10")

	g := Gen(t, "chatcmpl-1", k, "0.5")
	g.Streamed = true
	g.CacheCreationTokens = 7
	s.RecordGeneration(g)
	is.NoErr(s.Sync(ctx)) // sync

	got, err := s.Generation(ctx, a.ID, "chatcmpl-1")
	is.NoErr(err) // generation visible after Sync
	want := g
	want.CreatedAt = clock.Now()
	is.Equal(got.Cost.String(), "0.500000") // cost
	is.Equal(got, want)                     // every field round-trips

	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)                                 // account
	is.Equal(acct.Balance.String(), "9.500000")   // debited
	is.Equal(acct.TotalUsed.String(), "0.500000") // used
	CheckLedger(t, s)

	is.NoErr(s.Sync(ctx)) // sync with nothing pending
}

func testGeneration_NotFound(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := context.Background()
	a, k, _ := NewAccount(t, s, "acme", "1")
	b, _, _ := NewAccount(t, s, "beta", "1")
	s.RecordGeneration(Gen(t, "msg_1", k, "0.1"))
	is.NoErr(s.Sync(ctx)) // sync

	_, err := s.Generation(ctx, a.ID, "msg_2")
	is.True(errors.Is(err, store.ErrNotFound)) // unknown id
	_, err = s.Generation(ctx, b.ID, "msg_1")
	is.True(errors.Is(err, store.ErrNotFound)) // another account's generation
}

func testRecordGeneration_DropsBadRowsOnly(t *testing.T, open Opener) {
	is := is.New(t)
	var logs bytes.Buffer
	clock := NewClock()
	s := open(t, store.Options{
		Now:           clock.Now,
		BatchInterval: time.Hour, // one batch, flushed by Sync
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx := context.Background()
	a, k, _ := NewAccount(t, s, "acme", "10")

	s.RecordGeneration(Gen(t, "ok-1", k, "1"))
	s.RecordGeneration(Gen(t, "ok-1", k, "1"))      // duplicate id
	s.RecordGeneration(Gen(t, "negative", k, "-1")) // rejected before queueing
	orphan := Gen(t, "orphan", k, "1")
	orphan.AccountID = 999 // unknown account
	s.RecordGeneration(orphan)
	badKey := Gen(t, "bad-key", k, "1")
	badKey.KeyID = "key_ffffffffffffffff" // unknown key
	s.RecordGeneration(badKey)
	s.RecordGeneration(Gen(t, "ok-2", k, "2"))
	is.NoErr(s.Sync(ctx)) // sync

	bs, err := s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByDay})
	is.NoErr(err)                             // usage
	is.Equal(len(bs), 1)                      // one day
	is.Equal(bs[0].Requests, int64(2))        // the two good rows
	is.Equal(bs[0].Cost.String(), "3.000000") // their cost
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)                               // account
	is.Equal(acct.Balance.String(), "7.000000") // debited once per good row
	CheckLedger(t, s)
	for _, id := range []string{"ok-1", "negative", "orphan", "bad-key"} {
		is.True(bytes.Contains(logs.Bytes(), []byte("generation_id="+id))) // each drop is logged
	}
	is.Equal(bytes.Count(logs.Bytes(), []byte("generation dropped")), 4) // and nothing else
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "generation_id=orphan ") || strings.Contains(line, "generation_id=bad-key ") {
			// SQLite's foreign key, or PostgreSQL's INSERT naming them
			is.True(strings.Contains(line, "FOREIGN KEY constraint failed") || strings.Contains(line, "does not exist")) // the reference is the reason
		}
	}
}

// Accounts and keys created after the writer's first commits are taken
// (on PostgreSQL the writer checks references against those it has seen,
// and asks about new ones), and an unknown key is refused every time, not
// only the first.
func testRecordGeneration_ReferencesCreatedLater(t *testing.T, open Opener) {
	is := is.New(t)
	var logs bytes.Buffer
	s := open(t, store.Options{
		BatchInterval: time.Hour, // a batch per Sync
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx := context.Background()
	a, k1, _ := NewAccount(t, s, "acme", "10")
	s.RecordGeneration(Gen(t, "first", k1, "1"))
	is.NoErr(s.Sync(ctx)) // the writer has seen acme and k1

	ghost := Gen(t, "ghost-1", k1, "1")
	ghost.KeyID = "key_0000000000000000"
	s.RecordGeneration(ghost)
	_, k2, err := s.CreateKey(ctx, a.ID, "later")
	is.NoErr(err)
	s.RecordGeneration(Gen(t, "second-key", k2, "1"))
	is.NoErr(s.Sync(ctx)) // one batch: a new key, and one that does not exist

	b, kb, _ := NewAccount(t, s, "beta", "10")
	s.RecordGeneration(Gen(t, "second-account", kb, "2"))
	ghost.ID = "ghost-2"
	s.RecordGeneration(ghost)
	is.NoErr(s.Sync(ctx))

	for _, id := range []string{"first", "second-key"} {
		_, err := s.Generation(ctx, a.ID, id)
		is.NoErr(err) // committed
	}
	_, err = s.Generation(ctx, b.ID, "second-account")
	is.NoErr(err) // committed
	for _, id := range []string{"ghost-1", "ghost-2"} {
		_, err := s.Generation(ctx, a.ID, id)
		is.True(errors.Is(err, store.ErrNotFound))                             // refused
		is.True(bytes.Contains(logs.Bytes(), []byte("generation_id="+id+" "))) // and logged
	}
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(acct.Balance.String(), "8.000000") // the ghosts not charged
	CheckLedger(t, s)
}

func testClose_FlushesQueue(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	clock := NewClock()
	// Neither the size nor the interval would ever commit: only Close does.
	s := open(t, store.Options{Now: clock.Now, BatchSize: 1 << 20, BatchInterval: time.Hour})
	a, k, _ := NewAccount(t, s, "acme", "100")
	const n = 500
	for i := range n {
		s.RecordGeneration(Gen(t, "gen-"+strconv.Itoa(i), k, "0.01"))
	}
	is.NoErr(s.Close()) // close flushes

	s.RecordGeneration(Gen(t, "late", k, "1")) // after Close: dropped, no panic
	is.NoErr(s.Sync(ctx))                      // nothing pending after Close

	s2 := open(t, store.Options{Now: clock.Now})
	acct, err := s2.AccountByID(ctx, a.ID)
	is.NoErr(err)                                                           // reopen
	is.Equal(acct.Balance.String(), "95.000000")                            // all n debits committed
	is.Equal(acct.TotalUsed.String(), "5.000000")                           // all n costs
	is.Equal(QueryInt(t, s2, `SELECT COUNT(*) FROM generations`), int64(n)) // all n rows
	CheckLedger(t, s2)
}

// testLedger_ConcurrentReadersAndWriters runs thousands of RecordGeneration
// calls alongside readers, credit top-ups, feedback, and a second Store on
// the same file (as the CLI would be): nothing may fail, in particular not
// with "database is locked".
func testLedger_ConcurrentReadersAndWriters(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	clock := NewClock()
	s := open(t, store.Options{Now: clock.Now})
	cli := open(t, store.Options{Now: clock.Now})
	a, k, secret := NewAccount(t, s, "acme", "1000")
	b, kb, _ := NewAccount(t, s, "beta", "1000")

	const writers, perWriter = 8, 400
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []error
		stop    = make(chan struct{})
		readers sync.WaitGroup
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := k
			if w%2 == 1 {
				key = kb
			}
			for i := range perWriter {
				s.RecordGeneration(Gen(t, fmt.Sprintf("gen-%d-%d", w, i), key, "0.001"))
			}
		}()
	}
	// Each reader loops with a short pause, so that on a small machine the
	// writers still get the CPU; the other store, like an operator's CLI,
	// writes less often.
	read := func(name string, pause time.Duration, f func() error) {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(pause):
				}
				if err := f(); err != nil {
					fail(fmt.Errorf("%s: %w", name, err))
					return
				}
			}
		}()
	}
	read("usage", 100*time.Microsecond, func() error {
		_, err := s.Usage(ctx, a.ID, store.UsageQuery{GroupBy: store.GroupByAPIKey})
		return err
	})
	read("generation", 100*time.Microsecond, func() error {
		_, err := s.Generation(ctx, a.ID, "gen-0-0")
		if errors.Is(err, store.ErrNotFound) {
			return nil // not committed yet
		}
		return err
	})
	read("authenticate", 100*time.Microsecond, func() error {
		_, err := s.Authenticate(ctx, secret)
		return err
	})
	read("account", 100*time.Microsecond, func() error {
		_, err := s.AccountByID(ctx, b.ID)
		return err
	})
	read("sync", 100*time.Microsecond, func() error { return s.Sync(ctx) })
	var credits int
	read("cli credits", 5*time.Millisecond, func() error {
		credits++
		_, err := cli.AddCredits(ctx, a.ID, Dec(t, "1"), "cli")
		return err
	})
	read("feedback", 100*time.Microsecond, func() error {
		_, err := s.UpsertFeedback(ctx, b.ID, store.Feedback{ID: "gen-1-0", Rating: "up"}, time.Hour)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})

	wg.Wait()
	is.NoErr(s.Sync(ctx)) // sync
	close(stop)
	readers.Wait()
	for _, err := range errs {
		t.Errorf("concurrent operation failed: %v", err)
	}

	var rows int
	Query(t, s, `SELECT COUNT(*) FROM generations`, nil, func(r store.Scanner) error { return r.Scan(&rows) })
	is.Equal(rows, writers*perWriter) // every generation committed
	acct, err := s.AccountByID(ctx, b.ID)
	is.NoErr(err)                                 // beta
	is.Equal(acct.TotalUsed.String(), "1.600000") // 1600 × 0.001
	is.Equal(acct.Balance.String(), "998.400000") // 1000 - 1.6
	is.True(credits > 0)                          // the second store wrote too
	CheckLedger(t, s)
}

// A patient Sync (SyncWithin) waits for the writer's own commit and makes
// it commit early only when its patience runs out.
func testSyncWithin_WaitsForTheWritersOwnCommit(t *testing.T, open Opener) {
	is := is.New(t)
	// The writer would wait an hour to fill a batch: any commit
	// within the test is one a Sync asked for.
	s := open(t, store.Options{BatchInterval: time.Hour})
	_, k, _ := NewAccount(t, s, "acme", "10")
	s.RecordGeneration(Gen(t, "g1", k, "0.01"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.SyncWithin(ctx, time.Hour) }()
	select {
	case err := <-done:
		t.Fatalf("a patient sync returned (%v) before any commit", err)
	case <-time.After(200 * time.Millisecond):
	}
	is.Equal(s.LedgerStats().Committed, uint64(0)) // it asked for no commit
	cancel()
	is.True(errors.Is(<-done, context.Canceled)) // it ends with its context

	// Out of patience, it asks for the commit, as Sync does.
	is.NoErr(s.SyncWithin(context.Background(), 10*time.Millisecond))
	is.Equal(s.LedgerStats().Committed, uint64(1))
	_, err := s.Generation(context.Background(), k.AccountID, "g1")
	is.NoErr(err) // committed
}
