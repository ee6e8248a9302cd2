package sqlite

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// BenchmarkRecordGeneration measures the ledger's sustained throughput: the
// final Sync is timed, so ns/op includes each generation's share of its
// batch's commit, not just the enqueue.
func BenchmarkRecordGeneration(b *testing.B) {
	s, _ := newTestStore(b)
	_, k, _ := storetest.NewAccount(b, s, "acme", "1000000")
	g := storetest.Gen(b, "", k, "0.000123")
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
	_, _, secret := storetest.NewAccount(b, s, "acme", "")
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
	a, _, _ := storetest.NewAccount(b, s, "acme", "1000000")
	ctx := context.Background()
	keys := make([]store.Key, 1000)
	for i := range keys {
		_, k, err := s.CreateKey(ctx, a.ID, fmt.Sprint("k", i))
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	types := []string{"flash", "pro", "code", "json", "long", "reason", "vision", "document"}
	gens := make([]store.Generation, b.N)
	for i := range gens {
		g := storetest.Gen(b, "chatcmpl-"+strconv.Itoa(i), keys[(i*7919)%len(keys)], "0.000123")
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

// BenchmarkCommitBatch is one commit of the ledger writer (CommitBatch)
// of a batch of 128 generations of one key, about what a commit holds at
// saturation (bench/run.sh (a): ~6,500 calls/s, one commit every 20 ms),
// on a growing table: the CPU a committed generation costs, without the
// queue and the scheduling around it, so that its figure (ns/row) is the
// same from run to run and its instruction count repeatable.
func BenchmarkCommitBatch(b *testing.B) {
	s, _ := newTestStore(b)
	_, k, _ := storetest.NewAccount(b, s, "acme", "1000000")
	g := storetest.Gen(b, "", k, "0.000123")
	benchCommits(b, s, 128, func(id string, _ int) store.Generation {
		g.ID = id
		return g
	})
}

// benchCommits commits batches of rows generations, the n-th made by
// next("chatcmpl-<n>", n), and reports the time a committed generation
// took (ns/row).
func benchCommits(b *testing.B, s *Store, rows int, next func(id string, n int) store.Generation) {
	ctx := context.Background()
	batch := make([]store.GenRow, rows)
	agg := &store.BatchSums{Debits: make(map[int64]int64), Spend: make(map[store.SpendDay]store.SpendSum)}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			r, err := toRow(s, next("chatcmpl-"+strconv.Itoa(n), n))
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
	a, _, _ := storetest.NewAccount(b, s, "acme", "1000000")
	ctx := context.Background()
	keys := make([]store.Key, 1000)
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
	benchCommits(b, s, 20, func(id string, n int) store.Generation {
		g := storetest.Gen(b, id, keys[(n*7919)%len(keys)], "0.000123")
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
	s := openTestStore(b, path, store.Options{Existing: true})
	ctx := context.Background()
	rows, err := s.r.QueryContext(ctx, `SELECT id, account_id FROM api_keys ORDER BY id`)
	if err != nil {
		b.Fatal(err)
	}
	var keys []store.Key
	for rows.Next() {
		var k store.Key
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
	next := func(_ string, _ int) store.Generation {
		g := storetest.Gen(b, fmt.Sprintf("chatcmpl-%013d%08d", start, n), keys[(n*7919)%len(keys)], "0.000123")
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
			batch := make([]store.GenRow, 20)
			agg := &store.BatchSums{Debits: make(map[int64]int64), Spend: make(map[store.SpendDay]store.SpendSum)}
			commit := func() {
				for i := range batch {
					r, err := toRow(s, next("", 0))
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
