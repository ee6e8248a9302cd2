package postgres

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// BenchmarkPostgresLedgerCommit measures what the ledger costs PostgreSQL
// per generation, the figure that decides how much of a shared core its
// commits take (bench/postgres.sh, (c)): generations recorded and synced
// in commits of rows generations (40: 2,000 calls/s at the writer's 20 ms
// interval; fewer: the same rate committed more often), one account and
// key. It reports the CPU time PostgreSQL's backends used per generation
// (pg-cpu-µs/gen, from /proc: the server must run on this machine) and
// per commit (the length of the burst a commit puts on the server's
// core); ns/op is the writer's wall time per generation, round trip and
// fsync included.
func BenchmarkPostgresLedgerCommit(b *testing.B) {
	for _, rows := range []int{40, 20, 10} {
		b.Run("rows="+strconv.Itoa(rows), func(b *testing.B) {
			benchLedgerCommit(b, pgtest.DSN(b), rows)
		})
	}
}

func benchLedgerCommit(b *testing.B, dsn string, perCommit int) {
	p := openTestPostgres(b, dsn, store.Options{BatchInterval: time.Hour, BatchSize: perCommit})
	_, k, _ := storetest.NewAccount(b, p, "acme", "1000000")
	ctx := context.Background()
	// The charges are taken off a lease, as when serving.
	if _, err := p.Admission().Spend(ctx, k.AccountID, k.ID, time.Now()); err != nil {
		b.Fatal(err)
	}
	g := storetest.Gen(b, "", k, "0.000123")
	// Warm up: the writer's connection prepares its statements.
	for i := range perCommit {
		g.ID = "warm-" + strconv.Itoa(i)
		p.RecordGeneration(g)
	}
	if err := p.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	backends := func() (pids []int) {
		rows, err := p.r.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'svcgw' AND pid <> pg_backend_pid()`)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				b.Fatal(err)
			}
			pids = append(pids, pid)
		}
		return pids
	}
	cpu := func(pids []int) (used time.Duration, ok bool) {
		for _, pid := range pids {
			t, ok := procCPU(pid)
			if !ok {
				return 0, false
			}
			used += t
		}
		return used, true
	}
	pids := backends()
	before, ok := cpu(pids)
	b.ResetTimer()
	for i := range b.N {
		g.ID = "gen-" + strconv.Itoa(i)
		p.RecordGeneration(g)
		if (i+1)%perCommit == 0 {
			if err := p.Sync(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := p.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if after, ok2 := cpu(pids); ok && ok2 {
		used := after - before
		b.ReportMetric(float64(used.Microseconds())/float64(b.N), "pg-cpu-µs/gen")
		b.ReportMetric(float64(used.Microseconds())/(float64(b.N)/float64(perCommit)), "pg-cpu-µs/commit")
	}
}

// BenchmarkPostgresInsertGenerations compares the two ways of writing a
// batch's generations rows, 40 to a transaction: the ledger's INSERT …
// SELECT FROM unnest of one array per column, which goes in the batch's
// pipeline (one round trip for the whole commit), and COPY, which cannot
// (pgx runs it as an exchange of its own, so the commit would take
// BEGIN, COPY, the other statements and COMMIT in turn). It reports
// PostgreSQL's CPU per row, as BenchmarkPostgresLedgerCommit does.
func BenchmarkPostgresInsertGenerations(b *testing.B) {
	const rows = 40
	cols := []string{"id", "account_id", "key_id", "application", "surface", "model", "request_type", "tier",
		"streamed", "finish_reason", "prompt_tokens", "completion_tokens",
		"cached_prompt_tokens", "cache_creation_tokens", "reasoning_tokens",
		"cost_micros", "latency_ms", "generation_time_ms", "created_at"}
	for _, how := range []string{"unnest", "copy"} {
		b.Run(how, func(b *testing.B) {
			p := openTestPostgres(b, pgtest.DSN(b), store.Options{})
			_, k, _ := storetest.NewAccount(b, p, "acme", "1000000")
			ctx := context.Background()
			conn, err := p.w.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			var pid int
			if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				b.Fatal(err)
			}
			n := 0
			batch := func() error {
				tx, err := conn.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if how == "copy" {
					src := make([][]any, rows)
					for i := range src {
						n++
						src[i] = []any{"gen-" + strconv.Itoa(n), k.AccountID, k.ID, "app", "chat", "svc-fusion", "flash", "standard",
							false, "stop", int64(100), int64(20), int64(0), int64(0), int64(0), int64(123), int64(5), int64(4), int64(1732420000000 + n)}
					}
					if _, err := tx.CopyFrom(ctx, pgx.Identifier{"generations"}, cols, pgx.CopyFromRows(src)); err != nil {
						return err
					}
				} else {
					ids := make([]string, rows)
					accts := make([]int64, rows)
					keys := make([]string, rows)
					strs := make([]string, rows)
					bools := make([]bool, rows)
					nums := make([]int64, rows)
					times := make([]int64, rows)
					for i := range rows {
						n++
						ids[i], accts[i], keys[i], strs[i], nums[i], times[i] = "gen-"+strconv.Itoa(n), k.AccountID, k.ID, "x", 100, int64(1732420000000+n)
					}
					if _, err := tx.Exec(ctx, pgInsertGenerations, ids, accts, keys, strs, strs, strs, strs, strs,
						bools, strs, nums, nums, nums, nums, nums, nums, nums, nums, times); err != nil {
						return err
					}
				}
				return tx.Commit(ctx)
			}
			if err := batch(); err != nil { // warm up
				b.Fatal(err)
			}
			before, ok := procCPU(pid)
			b.ResetTimer()
			for range b.N {
				if err := batch(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if after, ok2 := procCPU(pid); ok && ok2 {
				b.ReportMetric(float64((after-before).Microseconds())/float64(b.N*rows), "pg-cpu-µs/row")
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "wall-µs/row")
		})
	}
}

// procCPU is the CPU time process pid has used, from /proc (Linux, and
// the server on this machine): the scheduler's runtime in nanoseconds
// (/proc/PID/schedstat), or utime+stime in clock ticks (10 ms) where that
// file is missing.
func procCPU(pid int) (time.Duration, bool) {
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat"); err == nil {
		if f := strings.Fields(string(st)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return time.Duration(ns), true
			}
		}
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	s, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	const tick = 10 * time.Millisecond      // USER_HZ is 100 on Linux
	return time.Duration(u+s) * tick, true
}
