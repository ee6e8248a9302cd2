//go:build bench

// Command seed fills a new svcgw database with synthetic calls for the
// ledger benchmark (bench/ledger.sh, bench/README.md): it creates the
// accounts and keys, adds credits, and writes every call through the
// store's own ledger writer (store.RecordGeneration), so the generation
// rows, debits, spend and usage roll-ups are exactly what svcgw serve would
// have written for the same calls.
//
//	seed -db /tmp/ledger.db -calls 10000000 -days 90 -keys 1000 -apps 50 \
//	    -secrets keys.txt -sample ids.txt -json seed.json
//
// The calls are spread evenly over the -days before -end, in time order.
// Keys are used with a Zipf skew (a few busy keys, a long tail); each key
// has a home application it calls from most of the time (its X-Title) and
// sometimes another; request types follow a fixed mix (flash and pro most,
// document least); token counts and costs vary per call. With -skew s > 0
// the application and the request type of each call are drawn instead
// with probability falling as 1/rank^s (rank 1 is app-00 and flash), so
// that some values are rare: at s = 3, app-49 is about one call in 150,000
// and document one in 600, the values a filtered listing must find without
// reading the rest. The figures are printed and, with -json, written as
// JSON.
//
// It is a bench tool in the bench module (bench/go.mod), like
// bench/svcgwprof the one other bench program that imports svcgw (store and
// llm).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	_ "modernc.org/sqlite" // database/sql driver, for the table sizes
)

// Result is what seed reports.
type Result struct {
	Calls      int64   `json:"calls"`
	Days       int     `json:"days"`
	Keys       int     `json:"keys"`
	Apps       int     `json:"apps"`
	Accounts   int     `json:"accounts"`
	BatchSize  int     `json:"batch_size"`
	Skew       float64 `json:"skew,omitempty"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// CPUSeconds is the process's user and system time while it seeded
	// (from the first call to the last commit): with CPUMicrosPerCall, the
	// figure to compare on a shared machine, where Seconds is the load's.
	CPUSeconds       float64 `json:"cpu_seconds"`
	CPUMicrosPerCall float64 `json:"cpu_us_per_call"`
	// Commits and CommitSeconds are the ledger's transactions and the wall
	// time inside them; WriterBusy is CommitSeconds / Seconds, the share of
	// the seeding the writer was committing (below 1: it waited for calls).
	Commits       int     `json:"commits"`
	CommitSeconds float64 `json:"commit_seconds"`
	WriterBusy    float64 `json:"writer_busy"`
	// CloseSeconds is the store's Close after the last commit, outside
	// Seconds: the final checkpoint of the WAL into the database file and
	// its syncs, which make the seeded database durable.
	CloseSeconds float64 `json:"close_seconds"`

	DBBytes     int64   `json:"db_bytes"` // database file after Close (WAL checkpointed)
	BytesPerRow float64 `json:"bytes_per_call"`
	// Rows per table, and the bytes of each table and its indexes
	// (dbstat), when available.
	Tables map[string]TableSize `json:"tables"`
	Start  string               `json:"start"`
	End    string               `json:"end"`
}

// TableSize is a table's row count and its bytes on disk, indexes included.
type TableSize struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		db       = flag.String("db", "", "database file to create (must not exist)")
		calls    = flag.Int64("calls", 10_000_000, "calls to write")
		days     = flag.Int("days", 90, "days the calls are spread over, ending at -end")
		endFlag  = flag.String("end", "", "RFC 3339 time of the last call (default: now)")
		nKeys    = flag.Int("keys", 1000, "API keys")
		nApps    = flag.Int("apps", 50, "applications (X-Title labels)")
		nAccts   = flag.Int("accounts", 1, "accounts the keys belong to (key i to account i mod accounts)")
		batch    = flag.Int("batch", 131072, "ledger batch size (store.Options.BatchSize): about a day of calls at 10M over 90 days, so each roll-up row is written about once a day")
		seed     = flag.Uint64("seed", 1, "random seed")
		skew     = flag.Float64("skew", 0, "draw applications and request types with probability 1/rank^skew (0: keys' home applications and the fixed mix of request types)")
		secrets  = flag.String("secrets", "", "write each key's id and secret here, one \"id secret account\" line per key")
		sample   = flag.String("sample", "", "write a sample of generation ids here, one \"id key-index\" line each")
		nSample  = flag.Int("sample-size", 20000, "generation ids in -sample")
		jsonOut  = flag.String("json", "", "write the result as JSON here")
		progress = flag.Duration("progress", 10*time.Second, "progress line interval")
		cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of the seeding here")
		traceOut = flag.String("trace", "", "write a runtime execution trace of the seeding here (go tool trace)")
		strip    = flag.Bool("strip-rollups", false, "seed nothing: turn the existing -db into a database of the schema before the usage roll-ups (migration 0003), to measure the upgrade's backfill")
	)
	flag.Parse()
	if *strip {
		return stripRollups(*db)
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	if *db == "" {
		return fmt.Errorf("-db is required")
	}
	if _, err := os.Stat(*db); err == nil {
		return fmt.Errorf("%s exists: seed writes new databases only", *db)
	}
	end := time.Now().UTC()
	if *endFlag != "" {
		t, err := time.Parse(time.RFC3339, *endFlag)
		if err != nil {
			return fmt.Errorf("-end: %w", err)
		}
		end = t.UTC()
	}
	start := end.Add(-time.Duration(*days) * 24 * time.Hour)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(*seed, *seed^0x5eed))

	// Creating accounts and keys stamps them with the store's clock: the
	// start of the period, so that nothing predates its account.
	clock := start.Add(-time.Hour)
	var commits, commitNanos atomic.Int64
	st, err := sqlite.Open(ctx, *db, store.Options{
		Now:       func() time.Time { return clock },
		BatchSize: *batch,
		// At most three batches wait (see waitQueue below), fewer than
		// would count as backed up.
		QueueSize: 4 * *batch,
		// A commit of a whole batch (131,072 rows by default) outlasts the
		// serving default of 5 s on a busy machine; the seeder is the only
		// writer, so a slow commit is slowness, not a lock held elsewhere.
		CommitTimeout: 5 * time.Minute,
		OnCommit: func(c store.LedgerCommit) {
			commits.Add(1)
			commitNanos.Add(int64(c.Duration))
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer st.Close()

	accounts := make([]store.Account, *nAccts)
	credit, _, _ := apd.NewFromString("1000000000") // far more than 10M calls cost
	for i := range accounts {
		a, _, err := st.EnsureAccount(ctx, fmt.Sprintf("bench-%d", i))
		if err != nil {
			return err
		}
		if accounts[i], err = st.AddCredits(ctx, a.ID, *credit, "bench seed"); err != nil {
			return err
		}
	}
	keys := make([]store.Key, *nKeys)
	var secretLines []string
	for i := range keys {
		a := accounts[i%len(accounts)]
		secret, k, err := st.CreateKey(ctx, a.ID, fmt.Sprintf("key-%04d", i))
		if err != nil {
			return err
		}
		keys[i] = k
		secretLines = append(secretLines, fmt.Sprintf("%s %s %d", k.ID, secret, a.ID))
	}
	if *secrets != "" {
		if err := os.WriteFile(*secrets, []byte(strings.Join(secretLines, "\n")+"\n"), 0o600); err != nil {
			return err
		}
	}

	apps := make([]string, *nApps)
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%02d.example.com", i)
	}
	zipf := rand.NewZipf(r, 1.1, 8, uint64(*nKeys-1))
	types := weighted{{"flash", 35}, {"pro", 30}, {"code", 15}, {"long", 6}, {"reason", 6}, {"json", 4}, {"vision", 3}, {"document", 1}}
	surfaces := weighted{{"chat", 50}, {"messages", 25}, {"gencontent", 15}, {"responses", 10}}
	var appRank, typeRank zipfRanks
	if *skew < 0 {
		return fmt.Errorf("-skew %g: want 0 or more", *skew)
	}
	if *skew > 0 {
		appRank, typeRank = newZipfRanks(len(apps), *skew), newZipfRanks(len(types), *skew)
	}
	prefixes := map[string]struct {
		p string
		n int
	}{"chat": {"chatcmpl-", 24}, "messages": {"msg_", 24}, "gencontent": {"gw", 22}, "responses": {"resp_", 24}}

	var sampleLines []string
	sampleEvery := max(*calls/int64(max(*nSample, 1)), 1)
	step := end.Sub(start) / time.Duration(*calls)
	began, lastLog := time.Now(), time.Now()
	cpuBegan := cpuTime()
	commits.Store(0)
	commitNanos.Store(0)
	for i := range *calls {
		at := start.Add(step * time.Duration(i))
		ki := int(zipf.Uint64())
		k := keys[ki]
		app := apps[ki%len(apps)]
		if r.IntN(100) < 15 {
			app = apps[r.IntN(len(apps))]
		}
		surface := surfaces.pick(r)
		typ := types.pick(r)
		if *skew > 0 {
			app, typ = apps[appRank.pick(r)], types[typeRank.pick(r)].name
		}
		in := 200 + r.IntN(7800)
		if typ == "long" {
			in += 100_000
		}
		out := 20 + r.IntN(1500)
		var cached, cacheWrite, reasoning int
		switch n := r.IntN(100); {
		case n < 30:
			cached = in / 2
		case n < 35:
			cacheWrite = in / 2
		}
		if typ == "reason" {
			reasoning = out / 2
		}
		// USD 1.25 per million input tokens (cached ones at a tenth), 10 per
		// million output: micro-dollars.
		cost := (int64(in-cached)*125 + int64(cached)*12 + int64(out)*1000) / 100
		pf := prefixes[surface]
		g := store.Generation{
			ID:                  llm.NewIDAt(pf.p, pf.n, at),
			AccountID:           k.AccountID,
			KeyID:               k.ID,
			Application:         app,
			Surface:             surface,
			Model:               "svc-fusion",
			RequestType:         typ,
			Tier:                "medium",
			Streamed:            r.IntN(2) == 0,
			FinishReason:        "stop",
			PromptTokens:        in,
			CompletionTokens:    out,
			CachedPromptTokens:  cached,
			CacheCreationTokens: cacheWrite,
			ReasoningTokens:     reasoning,
			Cost:                money.Micros(cost),
			LatencyMS:           int64(200 + r.IntN(800)),
			GenerationTimeMS:    int64(500 + r.IntN(5000)),
			CreatedAt:           at,
		}
		st.RecordGeneration(g)
		if i%sampleEvery == 0 && len(sampleLines) < *nSample {
			sampleLines = append(sampleLines, fmt.Sprintf("%s %d", g.ID, ki))
		}
		// The queue is the writer's: keep it bounded, whatever the ledger's
		// queueing policy, but never short of a batch. Waiting until it
		// drained (Sync) every other batch left the writer idle while the
		// next batch was made. Waiting at each batch's end until at most
		// one batch was pending (the one being committed) still left it
		// short: the writer's batches are not the seeder's (its first
		// commit takes what is queued after BatchInterval), so after each
		// commit it found less than a batch queued and waited BatchInterval
		// (20 ms) for the rest, ~1.5% of a seeding (bench/RESULTS.md,
		// "Seeding: what the bulk writer waits for besides its CPU").
		// Waiting until at most two batches are pending, a
		// whole batch is always queued when a commit ends.
		if (i+1)%int64(*batch) == 0 {
			if err := waitQueue(ctx, st, 2*int64(*batch)); err != nil {
				return err
			}
			if time.Since(lastLog) >= *progress {
				lastLog = time.Now()
				el := time.Since(began).Seconds()
				fmt.Fprintf(os.Stderr, "seed: %d calls, %.0f/s\n", i+1, float64(i+1)/el)
			}
		}
	}
	if err := st.Sync(ctx); err != nil {
		return err
	}
	took := time.Since(began)
	cpu := cpuTime() - cpuBegan
	closing := time.Now()
	if err := st.Close(); err != nil {
		return err
	}
	closed := time.Since(closing)
	if *sample != "" {
		if err := os.WriteFile(*sample, []byte(strings.Join(sampleLines, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}

	res := Result{
		Calls: *calls, Days: *days, Keys: *nKeys, Apps: *nApps, Accounts: *nAccts, BatchSize: *batch, Skew: *skew,
		Seconds: took.Seconds(), RowsPerSec: float64(*calls) / took.Seconds(),
		CPUSeconds: cpu.Seconds(), CPUMicrosPerCall: float64(cpu.Microseconds()) / float64(*calls),
		Commits: int(commits.Load()), CommitSeconds: time.Duration(commitNanos.Load()).Seconds(),
		WriterBusy:   time.Duration(commitNanos.Load()).Seconds() / took.Seconds(),
		CloseSeconds: closed.Seconds(),
		Start:        start.Format(time.RFC3339), End: end.Format(time.RFC3339),
	}
	if fi, err := os.Stat(*db); err == nil {
		res.DBBytes = fi.Size()
		res.BytesPerRow = float64(fi.Size()) / float64(*calls)
	}
	res.Tables, err = tableSizes(ctx, *db)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seed: table sizes:", err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Printf("%s\n", b)
	if *jsonOut != "" {
		return os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// stripRollups makes the database at path look as svcgw left it before
// migration 0003: without the roll-up tables, their state and its index,
// and without the migration's record (nor that of 0007, which rebuilt
// usage_periods). Opening it with svcgw then runs the migrations and the
// backfill, as an upgrade would.
func stripRollups(path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`DROP TABLE usage_daily`, `DROP TABLE usage_periods`, `DROP TABLE ledger_upkeep`,
		`DROP INDEX feedback_generation`, `DELETE FROM schema_migrations WHERE version IN (3, 7)`,
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return db.Close()
}

// weighted picks a name with probability proportional to its weight.
type weighted []struct {
	name string
	w    int
}

func (ws weighted) pick(r *rand.Rand) string {
	total := 0
	for _, w := range ws {
		total += w.w
	}
	n := r.IntN(total)
	for _, w := range ws {
		if n < w.w {
			return w.name
		}
		n -= w.w
	}
	return ws[len(ws)-1].name
}

// zipfRanks picks a rank 0..n-1 with probability proportional to
// 1/(rank+1)^s: the cumulative weights.
type zipfRanks []float64

func newZipfRanks(n int, s float64) zipfRanks {
	cum := make(zipfRanks, n)
	total := 0.0
	for i := range cum {
		total += math.Pow(float64(i+1), -s)
		cum[i] = total
	}
	return cum
}

func (z zipfRanks) pick(r *rand.Rand) int {
	x := r.Float64() * z[len(z)-1]
	i, _ := slices.BinarySearch(z, x)
	return min(i, len(z)-1)
}

// tableSizes counts each table's rows and, through the dbstat virtual
// table, the bytes of the table and of its indexes.
func tableSizes(ctx context.Context, path string) (map[string]TableSize, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT m.tbl_name, SUM(s.pgsize) FROM dbstat s
		JOIN sqlite_schema m ON m.name = s.name WHERE m.type IN ('table', 'index') GROUP BY m.tbl_name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sizes := map[string]TableSize{}
	for rows.Next() {
		var (
			name  string
			bytes int64
		)
		if err := rows.Scan(&name, &bytes); err != nil {
			return nil, err
		}
		sizes[name] = TableSize{Bytes: bytes}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for name, ts := range sizes {
		if strings.HasPrefix(name, "sqlite_") {
			continue
		}
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+name+`"`).Scan(&ts.Rows); err != nil {
			return nil, err
		}
		sizes[name] = ts
	}
	return sizes, nil
}

// waitQueue waits until at most limit generations are queued in st's
// ledger and not yet committed, or the ledger fails.
func waitQueue(ctx context.Context, st *sqlite.Store, limit int64) error {
	for {
		ls := st.LedgerStats()
		switch {
		case ls.Failing:
			return fmt.Errorf("ledger failing: %w", st.CheckLedger())
		case ls.Pending <= limit:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
