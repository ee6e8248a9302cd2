package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
)

// gen returns a generation of the account's key costing cost.
func gen(t testing.TB, id string, k Key, cost string) Generation {
	return Generation{
		ID: id, AccountID: k.AccountID, KeyID: k.ID,
		Application: "app", Surface: "chat", Model: "svc-fusion",
		RequestType: "pro", Tier: "medium", FinishReason: "stop",
		PromptTokens: 100, CompletionTokens: 20, CachedPromptTokens: 40, ReasoningTokens: 5,
		Cost: micros(t, cost), LatencyMS: 300, GenerationTimeMS: 250,
	}
}

// micros is the amount s, which must be a whole number of micro-dollars.
func micros(t testing.TB, s string) money.Micros {
	t.Helper()
	m, err := money.FromDecimal(dec(t, s))
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return m
}

func TestRecordGeneration_SyncReadsYourWrites(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		a, k, _ := newAccount(t, s, "acme", "10")

		g := gen(t, "chatcmpl-1", k, "0.5")
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
		checkLedger(t, s)

		is.NoErr(s.Sync(ctx)) // sync with nothing pending
	})
}

func TestGeneration_NotFound(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, _ := newTestDB(t, open)
		ctx := context.Background()
		a, k, _ := newAccount(t, s, "acme", "1")
		b, _, _ := newAccount(t, s, "beta", "1")
		s.RecordGeneration(gen(t, "msg_1", k, "0.1"))
		is.NoErr(s.Sync(ctx)) // sync

		_, err := s.Generation(ctx, a.ID, "msg_2")
		is.True(errors.Is(err, ErrNotFound)) // unknown id
		_, err = s.Generation(ctx, b.ID, "msg_1")
		is.True(errors.Is(err, ErrNotFound)) // another account's generation
	})
}

func TestRecordGeneration_DropsBadRowsOnly(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		var logs bytes.Buffer
		clock := newTestClock()
		s := open(t, Options{
			Now:           clock.Now,
			BatchInterval: time.Hour, // one batch, flushed by Sync
			Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		})
		ctx := context.Background()
		a, k, _ := newAccount(t, s, "acme", "10")

		s.RecordGeneration(gen(t, "ok-1", k, "1"))
		s.RecordGeneration(gen(t, "ok-1", k, "1"))      // duplicate id
		s.RecordGeneration(gen(t, "negative", k, "-1")) // rejected before queueing
		orphan := gen(t, "orphan", k, "1")
		orphan.AccountID = 999 // unknown account
		s.RecordGeneration(orphan)
		badKey := gen(t, "bad-key", k, "1")
		badKey.KeyID = "key_ffffffffffffffff" // unknown key
		s.RecordGeneration(badKey)
		s.RecordGeneration(gen(t, "ok-2", k, "2"))
		is.NoErr(s.Sync(ctx)) // sync

		bs, err := s.Usage(ctx, a.ID, UsageQuery{GroupBy: GroupByDay})
		is.NoErr(err)                             // usage
		is.Equal(len(bs), 1)                      // one day
		is.Equal(bs[0].Requests, int64(2))        // the two good rows
		is.Equal(bs[0].Cost.String(), "3.000000") // their cost
		acct, err := s.AccountByID(ctx, a.ID)
		is.NoErr(err)                               // account
		is.Equal(acct.Balance.String(), "7.000000") // debited once per good row
		checkLedger(t, s)
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
	})
}

// Accounts and keys created after the writer's first commits are taken
// (on PostgreSQL the writer checks references against those it has seen,
// and asks about new ones), and an unknown key is refused every time, not
// only the first.
func TestRecordGeneration_ReferencesCreatedLater(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		var logs bytes.Buffer
		s := open(t, Options{
			BatchInterval: time.Hour, // a batch per Sync
			Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		})
		ctx := context.Background()
		a, k1, _ := newAccount(t, s, "acme", "10")
		s.RecordGeneration(gen(t, "first", k1, "1"))
		is.NoErr(s.Sync(ctx)) // the writer has seen acme and k1

		ghost := gen(t, "ghost-1", k1, "1")
		ghost.KeyID = "key_0000000000000000"
		s.RecordGeneration(ghost)
		_, k2, err := s.CreateKey(ctx, a.ID, "later")
		is.NoErr(err)
		s.RecordGeneration(gen(t, "second-key", k2, "1"))
		is.NoErr(s.Sync(ctx)) // one batch: a new key, and one that does not exist

		b, kb, _ := newAccount(t, s, "beta", "10")
		s.RecordGeneration(gen(t, "second-account", kb, "2"))
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
			is.True(errors.Is(err, ErrNotFound))                                   // refused
			is.True(bytes.Contains(logs.Bytes(), []byte("generation_id="+id+" "))) // and logged
		}
		acct, err := s.AccountByID(ctx, a.ID)
		is.NoErr(err)
		is.Equal(acct.Balance.String(), "8.000000") // the ghosts not charged
		checkLedger(t, s)
	})
}

func TestClose_FlushesQueue(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		clock := newTestClock()
		path := filepath.Join(t.TempDir(), "svcgw.db")
		// Neither the size nor the interval would ever commit: only Close does.
		s := openTestStore(t, path, Options{Now: clock.Now, BatchSize: 1 << 20, BatchInterval: time.Hour})
		a, k, _ := newAccount(t, s, "acme", "100")
		const n = 500
		for i := range n {
			s.RecordGeneration(gen(t, "gen-"+strconv.Itoa(i), k, "0.01"))
		}
		is.NoErr(s.Close()) // close flushes

		s.RecordGeneration(gen(t, "late", k, "1")) // after Close: dropped, no panic
		is.NoErr(s.Sync(ctx))                      // nothing pending after Close

		s2 := openTestStore(t, path, Options{Now: clock.Now})
		acct, err := s2.AccountByID(ctx, a.ID)
		is.NoErr(err)                                 // reopen
		is.Equal(acct.Balance.String(), "95.000000")  // all n debits committed
		is.Equal(acct.TotalUsed.String(), "5.000000") // all n costs
		var rows int
		is.NoErr(s2.r.QueryRow(`SELECT COUNT(*) FROM generations`).Scan(&rows)) // count
		is.Equal(rows, n)                                                       // all n rows
		checkLedger(t, s2)
	})
}

// TestLedger_ConcurrentReadersAndWriters runs thousands of RecordGeneration
// calls alongside readers, credit top-ups, feedback, and a second Store on
// the same file (as the CLI would be): nothing may fail, in particular not
// with "database is locked".
func TestLedger_ConcurrentReadersAndWriters(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		clock := newTestClock()
		s := open(t, Options{Now: clock.Now})
		cli := open(t, Options{Now: clock.Now})
		a, k, secret := newAccount(t, s, "acme", "1000")
		b, kb, _ := newAccount(t, s, "beta", "1000")

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
					s.RecordGeneration(gen(t, fmt.Sprintf("gen-%d-%d", w, i), key, "0.001"))
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
			_, err := s.Usage(ctx, a.ID, UsageQuery{GroupBy: GroupByAPIKey})
			return err
		})
		read("generation", 100*time.Microsecond, func() error {
			_, err := s.Generation(ctx, a.ID, "gen-0-0")
			if errors.Is(err, ErrNotFound) {
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
			_, err := cli.AddCredits(ctx, a.ID, dec(t, "1"), "cli")
			return err
		})
		read("feedback", 100*time.Microsecond, func() error {
			_, err := s.UpsertFeedback(ctx, b.ID, Feedback{ID: "gen-1-0", Rating: "up"}, time.Hour)
			if errors.Is(err, ErrNotFound) {
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
		query(t, s, `SELECT COUNT(*) FROM generations`, nil, func(r rowScanner) error { return r.Scan(&rows) })
		is.Equal(rows, writers*perWriter) // every generation committed
		acct, err := s.AccountByID(ctx, b.ID)
		is.NoErr(err)                                 // beta
		is.Equal(acct.TotalUsed.String(), "1.600000") // 1600 × 0.001
		is.Equal(acct.Balance.String(), "998.400000") // 1000 - 1.6
		is.True(credits > 0)                          // the second store wrote too
		checkLedger(t, s)
	})
}

// BenchmarkRecordGeneration measures the ledger's sustained throughput: the
// final Sync is timed, so ns/op includes each generation's share of its
// batch's commit, not just the enqueue.
func BenchmarkRecordGeneration(b *testing.B) {
	s, _ := newTestStore(b)
	_, k, _ := newAccount(b, s, "acme", "1000000")
	g := gen(b, "", k, "0.000123")
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "chatcmpl-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		g.ID = ids[i]
		s.RecordGeneration(g)
	}
	if err := s.Sync(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAuthenticate measures the per-request key lookup.
func BenchmarkAuthenticate(b *testing.B) {
	s, _ := newTestStore(b)
	_, _, secret := newAccount(b, s, "acme", "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Authenticate(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordGeneration_ManyKeys is BenchmarkRecordGeneration with the
// traffic of a busy gateway: 1,000 keys of one account, 50 applications and
// every request type, so that nearly every generation of a batch has usage
// roll-up rows of its own to update.
func BenchmarkRecordGeneration_ManyKeys(b *testing.B) {
	s, _ := newTestStore(b)
	a, _, _ := newAccount(b, s, "acme", "1000000")
	ctx := context.Background()
	keys := make([]Key, 1000)
	for i := range keys {
		_, k, err := s.CreateKey(ctx, a.ID, fmt.Sprint("k", i))
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	types := []string{"flash", "pro", "code", "json", "long", "reason", "vision", "document"}
	gens := make([]Generation, b.N)
	for i := range gens {
		g := gen(b, "chatcmpl-"+strconv.Itoa(i), keys[(i*7919)%len(keys)], "0.000123")
		g.Application = "app-" + strconv.Itoa(i%50)
		g.RequestType = types[i%len(types)]
		gens[i] = g
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.RecordGeneration(gens[i])
	}
	if err := s.Sync(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCommitBatch is one commit of the ledger writer (commitBatch)
// of a batch of 128 generations of one key, about what a commit holds at
// saturation (bench/run.sh (a): ~6,500 calls/s, one commit every 20 ms),
// on a growing table: the CPU a committed generation costs, without the
// queue and the scheduling around it, so that its figure (ns/row) is the
// same from run to run and its instruction count repeatable.
func BenchmarkCommitBatch(b *testing.B) {
	s, _ := newTestStore(b)
	_, k, _ := newAccount(b, s, "acme", "1000000")
	g := gen(b, "", k, "0.000123")
	benchCommits(b, s, 128, func(id string, _ int) Generation {
		g.ID = id
		return g
	})
}

// benchCommits commits batches of rows generations, the n-th made by
// next("chatcmpl-<n>", n), and reports the time a committed generation
// took (ns/row).
func benchCommits(b *testing.B, s *Store, rows int, next func(id string, n int) Generation) {
	ctx := context.Background()
	batch := make([]GenRow, rows)
	agg := &BatchSums{Debits: make(map[int64]int64), Spend: make(map[SpendDay]SpendSum)}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			r, err := s.toRow(next("chatcmpl-"+strconv.Itoa(n), n))
			if err != nil {
				b.Fatal(err)
			}
			batch[i] = r
			n++
		}
		if err := s.CommitBatch(ctx, batch, agg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/row")
}

// BenchmarkCommitBatch_ManyKeys is BenchmarkCommitBatch with the commits
// of a busy gateway with many keys: 20 generations a commit (1,000 calls a
// second, one commit every 20 ms), each from another of 1,000 keys, 50
// applications and every request type, so that each commit upserts 20
// usage_daily and 145 usage_periods rows besides its 20 generations (the
// 10M ledger's chat phase upserted ~20 and ~125 a commit, bench/RESULTS.md).
func BenchmarkCommitBatch_ManyKeys(b *testing.B) {
	s, _ := newTestStore(b)
	a, _, _ := newAccount(b, s, "acme", "1000000")
	ctx := context.Background()
	keys := make([]Key, 1000)
	for i := range keys {
		_, k, err := s.CreateKey(ctx, a.ID, fmt.Sprint("k", i))
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	types := []string{"flash", "pro", "code", "json", "long", "reason", "vision", "document"}
	apps := make([]string, 50)
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%02d.example.com", i)
	}
	benchCommits(b, s, 20, func(id string, n int) Generation {
		g := gen(b, id, keys[(n*7919)%len(keys)], "0.000123")
		g.Application = apps[(n*31)%len(apps)]
		g.RequestType = types[n%len(types)]
		return g
	})
}

// BenchmarkCommitBatch_Ledger is BenchmarkCommitBatch_ManyKeys on a large
// ledger, at several sizes of the serving writer's page cache: set
// SVCGW_BENCH_LEDGER to a database seeded by bench/seed (1M-2M calls; the
// benchmark adds its generations to it). Each commit is 20 generations of
// 20 of the ledger's keys, 50 applications and every request type, made
// now with time-ordered ids, as a busy gateway commits them, each size
// after 100 unmeasured commits. cpu-ns/row is the process's CPU time per
// committed generation (the machine's other work does not count in it),
// reads/row and writes/row its system calls. -count repeats a size before
// the next, so to alternate run one size a process in turns
// (-bench 'Ledger/cache=512KiB$'); bench/RESULTS.md, "The
// peak of (d): SQLite's caches and the process's fixed memory".
func BenchmarkCommitBatch_Ledger(b *testing.B) {
	path := os.Getenv("SVCGW_BENCH_LEDGER")
	if path == "" {
		b.Skip("SVCGW_BENCH_LEDGER names no seeded ledger (bench/seed)")
	}
	s := openTestStore(b, path, Options{Existing: true})
	ctx := context.Background()
	rows, err := s.r.QueryContext(ctx, `SELECT id, account_id FROM api_keys ORDER BY id`)
	if err != nil {
		b.Fatal(err)
	}
	var keys []Key
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.ID, &k.AccountID); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil || len(keys) == 0 {
		b.Fatalf("keys: %d, %v", len(keys), err)
	}
	types := []string{"flash", "pro", "code", "json", "long", "reason", "vision", "document"}
	apps := make([]string, 50)
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%02d", i)
	}
	start := time.Now().UnixMilli()
	n := 0
	next := func(_ string, _ int) Generation {
		g := gen(b, fmt.Sprintf("chatcmpl-%013d%08d", start, n), keys[(n*7919)%len(keys)], "0.000123")
		g.Application = apps[(n*31)%len(apps)]
		g.RequestType = types[n%len(types)]
		n++
		return g
	}
	for _, kib := range []int{2000, 1024, 512, 256} {
		b.Run(fmt.Sprintf("cache=%dKiB", kib), func(b *testing.B) {
			if _, err := s.w.ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size = -%d", kib)); err != nil {
				b.Fatal(err)
			}
			batch := make([]GenRow, 20)
			agg := &BatchSums{Debits: make(map[int64]int64), Spend: make(map[SpendDay]SpendSum)}
			commit := func() {
				for i := range batch {
					r, err := s.toRow(next("", 0))
					if err != nil {
						b.Fatal(err)
					}
					batch[i] = r
				}
				if err := s.CommitBatch(ctx, batch, agg); err != nil {
					b.Fatal(err)
				}
			}
			for range 100 {
				commit()
			}
			cpu0 := processCPU()
			reads0, writes0 := ioCalls(b)
			commits := 0
			for b.Loop() {
				commit()
				commits++
			}
			rows := float64(commits * len(batch))
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/rows, "cpu-ns/row")
			reads, writes := ioCalls(b)
			b.ReportMetric(float64(reads-reads0)/rows, "reads/row")
			b.ReportMetric(float64(writes-writes0)/rows, "writes/row")
		})
	}
}

// ioCalls is the number of read and write system calls the process has
// made (/proc/self/io's syscr and syscw): SQLite reads each page it does
// not hold in its cache with one, and writes each page it commits, or
// spills from a full cache before the commit, with one.
func ioCalls(b *testing.B) (reads, writes int64) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io:", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		name, v, _ := strings.Cut(line, ": ")
		if name != "syscr" && name != "syscw" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		if name == "syscr" {
			reads = n
		} else {
			writes = n
		}
	}
	return reads, writes
}

// A patient Sync (SyncWithin) waits for the writer's own commit and makes
// it commit early only when its patience runs out.
func TestSyncWithin_WaitsForTheWritersOwnCommit(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		// The writer would wait an hour to fill a batch: any commit
		// within the test is one a Sync asked for.
		s := open(t, Options{BatchInterval: time.Hour})
		_, k, _ := newAccount(t, s, "acme", "10")
		s.RecordGeneration(gen(t, "g1", k, "0.01"))

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
	})
}
