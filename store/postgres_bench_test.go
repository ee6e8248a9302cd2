package store

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/pgtest"
)

// BenchmarkPostgresLedgerCommit measures what the ledger costs PostgreSQL
// per generation, the figure that decides how much of a shared core its
// commits take (bench/postgres.sh, (c)): generations recorded and synced
// in commits of 40 rows (2,000 calls/s at the writer's 20 ms interval), one
// account and key. It reports the CPU time PostgreSQL's backends used per
// generation (pg-cpu-µs/gen, from /proc: the server must run on this
// machine) and per commit; ns/op is the writer's wall time per
// generation, round trip and fsync included. plans=auto is the writer with
// PostgreSQL's default plan_cache_mode, as before the writer pool asked
// for generic plans.
func BenchmarkPostgresLedgerCommit(b *testing.B) {
	for _, mode := range []string{"writer-default", "auto"} {
		b.Run("plans="+mode, func(b *testing.B) {
			dsn := pgtest.DSN(b)
			if mode != "writer-default" {
				sep := "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
				dsn += sep + "plan_cache_mode=" + mode
			}
			benchLedgerCommit(b, dsn)
		})
	}
}

func benchLedgerCommit(b *testing.B, dsn string) {
	const perCommit = 40
	p := openTestPostgres(b, dsn, Options{BatchInterval: time.Hour, BatchSize: perCommit})
	_, k, _ := newAccount(b, p, "acme", "1000000")
	ctx := context.Background()
	// The charges are taken off a lease, as when serving.
	if _, err := p.Admission().Spend(ctx, k.AccountID, k.ID, time.Now()); err != nil {
		b.Fatal(err)
	}
	g := gen(b, "", k, "0.000123")
	// Warm up: the writer's connection prepares its statements.
	for i := range perCommit {
		g.ID = "warm-" + strconv.Itoa(i)
		p.RecordGeneration(g)
	}
	if err := p.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	backends := func() (pids []string) {
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
			pids = append(pids, strconv.Itoa(pid))
		}
		return pids
	}
	cpu := func(pids []string) (ticks int64, ok bool) {
		for _, pid := range pids {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				return 0, false
			}
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
			u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
			s, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
			ticks += u + s
		}
		return ticks, true
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
		const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
		used := time.Duration(after-before) * tick
		b.ReportMetric(float64(used.Microseconds())/float64(b.N), "pg-cpu-µs/gen")
		b.ReportMetric(float64(used.Microseconds())/(float64(b.N)/perCommit), "pg-cpu-µs/commit")
	}
}
