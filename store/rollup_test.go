package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
)

// checkRollups asserts that every roll-up holds exactly the sums of the
// generations (usage_daily per account, day, key, application and request
// type; usage_periods per axis, span and bucket), and that spend_daily,
// which spend caps read, agrees with usage_periods. Only valid once the
// backfill is complete and before retention has deleted anything.
func checkRollups(t testing.TB, s DB) {
	t.Helper()
	const sums = `COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_prompt_tokens),
		SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros)`
	const cols = `requests, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros`
	// The generations' day, month and year, as day numbers, in SQL.
	const day = `(created_at / 86400000)`
	month := engineSQL(s, `(unixepoch(date(created_at / 1000, 'unixepoch', 'start of month')) / 86400)`,
		`(extract(epoch FROM date_trunc('month', to_timestamp(created_at / 1000) AT TIME ZONE 'UTC'))::bigint / 86400)`)
	year := engineSQL(s, `(unixepoch(date(created_at / 1000, 'unixepoch', 'start of year')) / 86400)`,
		`(extract(epoch FROM date_trunc('year', to_timestamp(created_at / 1000) AT TIME ZONE 'UTC'))::bigint / 86400)`)
	// Each check is two queries that must hold the same rows: A EXCEPT B
	// and B EXCEPT A must both be empty.
	type check struct{ a, b string }
	checks := map[string]check{
		"usage_daily": {
			`SELECT account_id, ` + day + `, COALESCE(key_id, ''), application, request_type, ` + sums + ` FROM generations GROUP BY 1, 2, 3, 4, 5`,
			`SELECT account_id, day, key_id, application, request_type, ` + cols + ` FROM usage_daily`,
		},
		"spend_daily against usage_periods": {
			`SELECT account_id, key_id, day, requests, cost_micros FROM spend_daily`,
			`SELECT account_id, bucket, first_day, requests, cost_micros FROM usage_periods WHERE axis = 'api_key' AND span = 'day'`,
		},
	}
	for _, ax := range []struct{ axis, bucket string }{
		{"day", `''`}, {"request_type", "request_type"}, {"application", "application"}, {"api_key", "COALESCE(key_id, '')"},
	} {
		for _, span := range []struct{ name, first string }{{"day", day}, {"month", month}, {"year", year}} {
			if ax.axis == "day" && span.name != "day" {
				continue
			}
			checks["usage_periods "+ax.axis+"/"+span.name] = check{
				`SELECT account_id, ` + span.first + `, ` + ax.bucket + `, ` + sums + ` FROM generations GROUP BY 1, 2, 3`,
				`SELECT account_id, first_day, bucket, ` + cols + ` FROM usage_periods WHERE axis = '` + ax.axis + `' AND span = '` + span.name + `'`,
			}
		}
	}
	if n := queryInt(t, s, `SELECT COUNT(*) FROM usage_periods WHERE axis = 'day' AND span != 'day'`); n != 0 {
		t.Errorf("usage_periods has %d month or year rows of axis day, want none", n)
	}
	for name, c := range checks {
		for _, q := range []string{c.a + ` EXCEPT ` + c.b, c.b + ` EXCEPT ` + c.a} {
			if bad := queryInt(t, s, `SELECT COUNT(*) FROM (`+q+`) x`); bad != 0 {
				t.Errorf("%s disagrees with generations on %d rows", name, bad)
			}
		}
	}
}

// usageFromGenerations is the usage report computed the slow way, over
// generations, as svcgw did before roll-ups: what Usage must equal.
func usageFromGenerations(t testing.TB, s DB, accountID int64, q UsageQuery) []Bucket {
	t.Helper()
	where, args := `account_id = ?`, []any{accountID}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, ms(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, ms(q.End))
	}
	expr := scanExprs[q.GroupBy]
	if q.GroupBy == GroupByDay {
		expr = engineSQL(s, expr, `to_char(to_timestamp(created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`)
	}
	out := []Bucket{}
	query(t, s, `SELECT `+expr+` AS bucket, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),
		SUM(cached_prompt_tokens), SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros)
		FROM generations WHERE `+where+` GROUP BY 1`, args, func(r rowScanner) error {
		var (
			b    Bucket
			cost int64
		)
		if err := r.Scan(&b.Bucket, &b.Requests, &b.InputTokens, &b.OutputTokens, &b.CachedInputTokens,
			&b.CacheWriteTokens, &b.ReasoningTokens, &cost); err != nil {
			return err
		}
		b.TotalTokens = b.InputTokens + b.OutputTokens
		b.Cost = fromMicros(cost)
		out = append(out, b)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket < out[j].Bucket })
	return out
}

// sameBuckets compares two reports field by field (costs by value).
func sameBuckets(got, want []Bucket) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d buckets, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Cost.Cmp(&w.Cost) != 0 {
			return fmt.Errorf("bucket %q: cost %s, want %s", g.Bucket, g.Cost.String(), w.Cost.String())
		}
		g.Cost, w.Cost = w.Cost, g.Cost
		if g != w {
			return fmt.Errorf("bucket %d: %+v, want %+v", i, g, w)
		}
	}
	return nil
}

// usageRanges are day-aligned windows around the generations of
// randomWorkload, chosen to cover unbounded sides, single days, weeks, whole
// and partial months and years, a year's end and empty windows, and random
// more of them.
func usageRanges(r *rand.Rand, first, last time.Time, random int) [][2]time.Time {
	d := func(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }
	ranges := [][2]time.Time{
		{}, {d(first), time.Time{}}, {time.Time{}, d(last)},
		{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)},    // one whole month
		{time.Date(2024, 12, 15, 0, 0, 0, 0, time.UTC), time.Date(2025, 2, 10, 0, 0, 0, 0, time.UTC)}, // edges + a month
		{time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},  // one day
		{time.Date(2025, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 10, 0, 0, 0, 0, time.UTC)},  // empty
		{time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}},                                    // after everything
		{time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2025, 2, 3, 0, 0, 0, 0, time.UTC)},  // a day, a year, a month, days
		{time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},    // whole years
		{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}},                                    // from a year's start
	}
	span := int(last.Sub(first).Hours()/24) + 2
	for range random {
		a := d(first).AddDate(0, 0, r.IntN(span)-1)
		b := a.AddDate(0, 0, r.IntN(span))
		ranges = append(ranges, [2]time.Time{a, b})
	}
	return ranges
}

// randomWorkload records n generations spread over accounts, keys,
// applications, request types and ~four months (Nov 2024 – Mar 2025, so a
// year's end too), with zero-cost (failed) and cached calls, syncing now
// and then so that batches vary. It returns the accounts.
func randomWorkload(t testing.TB, s DB, clock *testClock, r *rand.Rand, n int) []Account {
	t.Helper()
	ctx := context.Background()
	var (
		accounts []Account
		keys     []Key
	)
	for _, name := range []string{"acme", "globex", "initech"} {
		a, k, _ := newAccount(t, s, name, "1000")
		accounts = append(accounts, a)
		keys = append(keys, k)
		for i := range 2 {
			_, k2, err := s.CreateKey(ctx, a.ID, fmt.Sprint("k", i))
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k2)
		}
	}
	apps := []string{"alpha", "beta", "gamma.example.org", "Ünïcode app", ""}
	types := []string{"flash", "pro", "code", "json", "long", "reason", "vision", "document"}
	start := time.Date(2024, 11, 20, 0, 0, 0, 0, time.UTC)
	for i := range n {
		k := keys[r.IntN(len(keys))]
		g := Generation{
			ID: fmt.Sprintf("gen-%06d", i), AccountID: k.AccountID, KeyID: k.ID,
			Application: apps[r.IntN(len(apps))], RequestType: types[r.IntN(len(types))],
			Surface: "chat", Model: "svc-fusion", Streamed: r.IntN(2) == 0,
			PromptTokens: r.IntN(5000), CompletionTokens: r.IntN(2000),
			Cost: money.Micros(r.IntN(50000)),
		}
		if r.IntN(10) == 0 { // a failed call: recorded at zero cost
			g.Cost, g.CompletionTokens, g.FinishReason = 0, 0, "error"
		}
		g.CachedPromptTokens = r.IntN(g.PromptTokens + 1)
		g.CacheCreationTokens = r.IntN(g.PromptTokens - g.CachedPromptTokens + 1)
		g.ReasoningTokens = r.IntN(g.CompletionTokens + 1)
		if r.IntN(50) == 0 {
			g.KeyID = "" // a generation made without a key
		}
		clock.Set(start.Add(time.Duration(r.Int64N(int64(120 * 24 * time.Hour)))))
		s.RecordGeneration(g)
		if r.IntN(40) == 0 {
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return accounts
}

func TestRollups_EqualGenerations(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		s, clock := newTestDB(t, open)
		r := rand.New(rand.NewPCG(1, 2))
		accounts := randomWorkload(t, s, clock, r, 1200)
		checkRollups(t, s)
		checkLedger(t, s)
		checkAllUsage(t, s, r, accounts, 10)
	})
}

// checkAllUsage asserts that Usage equals the report over generations for
// every grouping of every account over the ranges of usageRanges.
func checkAllUsage(t *testing.T, s DB, r *rand.Rand, accounts []Account, random int) {
	t.Helper()
	ctx := context.Background()
	ranges := usageRanges(r, time.Date(2024, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 20, 0, 0, 0, 0, time.UTC), random)
	for _, a := range accounts {
		for _, groupBy := range []string{GroupByDay, GroupByRequestType, GroupByApplication, GroupByAPIKey} {
			for _, rg := range ranges {
				if !rg[0].IsZero() && !rg[1].IsZero() && rg[0].After(rg[1]) {
					continue
				}
				q := UsageQuery{GroupBy: groupBy, Start: rg[0], End: rg[1]}
				got, err := s.Usage(ctx, a.ID, q)
				if err != nil {
					t.Fatalf("usage %+v: %v", q, err)
				}
				if err := sameBuckets(got, usageFromGenerations(t, s, a.ID, q)); err != nil {
					t.Errorf("account %s, group by %s, %s – %s: %v", a.Name, groupBy,
						rg[0].Format(time.DateOnly), rg[1].Format(time.DateOnly), err)
				}
			}
		}
	}
}

func TestWholeMonths(t *testing.T) {
	d := func(y int, m time.Month, day int) int32 { return dayNumber(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) }
	tests := []struct {
		name           string
		from, to       int32
		wantM0, wantM1 int32
	}{
		{"unbounded", minDay, maxDay, minDay, maxDay},
		{"from a month's first day", d(2025, 1, 1), maxDay, d(2025, 1, 1), maxDay},
		{"from within a month", d(2025, 1, 2), maxDay, d(2025, 2, 1), maxDay},
		{"to a month's first day", minDay, d(2025, 3, 1), minDay, d(2025, 3, 1)},
		{"to within a month", minDay, d(2025, 3, 31), minDay, d(2025, 3, 1)},
		{"within one month", d(2025, 1, 5), d(2025, 1, 25), d(2025, 2, 1), d(2025, 1, 1)},
		{"across a year's end", d(2024, 12, 1), d(2025, 1, 1), d(2024, 12, 1), d(2025, 1, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			m0, m1 := wholeMonths(tt.from, tt.to)
			is.Equal(m0, tt.wantM0) // first whole month
			is.Equal(m1, tt.wantM1) // end of the last whole month
		})
	}
}

// openLegacyDB creates a database at path with the schema svcgw had before
// the roll-ups (migration 0001 only), the way that version created it.
func openLegacyDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path+"?"+dsnPragmas+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		t.Fatal(err)
	}
	ms, err := sqliteMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].version != 1 {
		t.Fatalf("first migration is %s", ms[0].name)
	}
	if err := applyMigration(ctx, sqliteMigrator{db}, ms[0], ms[len(ms)-1].version, time.Now, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return db
}

// legacyCopy makes a database of the schema before the roll-ups holding
// the accounts, keys, credits, generations, spend and feedback of src (a
// store's file), as the ledger of that version had written them.
func legacyCopy(t testing.TB, src, path string) {
	t.Helper()
	db := openLegacyDB(t, path)
	if _, err := db.Exec(`ATTACH DATABASE ? AS src`, src); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"accounts", "api_keys", "credit_transactions", "generations", "spend_daily", "feedback"} {
		// The columns the legacy schema has (later migrations added
		// some to the source's).
		var cols string
		if err := db.QueryRow(`SELECT group_concat(name, ', ') FROM pragma_table_info(?, 'main')`, table).Scan(&cols); err != nil {
			t.Fatal(err)
		}
		q := `INSERT INTO main.` + table + ` SELECT ` + cols + ` FROM src.` + table
		if table == "generations" {
			q += ` ORDER BY rowid` // rowids as the old ledger gave them
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	if _, err := db.Exec(`DETACH DATABASE src`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBackfill_DatabaseFromBeforeRollups(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))

	// A store of today's schema writes a realistic ledger, which is copied
	// into a database of the previous schema.
	src, clock := newTestStore(t)
	accounts := randomWorkload(t, src, clock, r, 1200)
	is.NoErr(src.Close())
	legacy := filepath.Join(dir, "legacy.db")
	legacyCopy(t, src.path, legacy)

	s := openTestStore(t, legacy, Options{Now: clock.Now})
	b, err := readBackfill(ctx, s.r)
	is.NoErr(err)
	is.Equal(b.after, int64(0))             // nothing rolled up by the migration itself
	is.Equal(b.through, int64(1200))        // every generation of the old version is to do
	is.True(!s.rollupsComplete.Load())      // usage knows it
	checkAllUsage(t, s, r, accounts[:2], 0) // exact before the backfill starts: roll-ups + scan
	var rolled int
	is.NoErr(s.r.QueryRow(`SELECT COUNT(*) FROM usage_daily`).Scan(&rolled))
	is.Equal(rolled, 0) // nothing rolled up yet

	// Part of the way through, with new calls recorded meanwhile: they are
	// rolled up by the ledger, the old ones by the backfill, each once.
	var rs rollupSums
	ch, err := s.backfillChunk(ctx, 500, 1_000_000, &rs, nil)
	is.NoErr(err)
	is.Equal(ch.rolled, 500)
	is.Equal(ch.left, int64(700))
	k := Key{AccountID: accounts[0].ID}
	for i := range 50 {
		clock.Set(time.Date(2025, 3, 25, 10, i, 0, 0, time.UTC))
		g := gen(t, fmt.Sprint("new-", i), k, "0.25")
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	checkAllUsage(t, s, r, accounts[:2], 0) // exact halfway

	// A restart halfway resumes where the backfill stopped.
	is.NoErr(s.Close())
	s = openTestStore(t, legacy, Options{Now: clock.Now})
	is.True(!s.rollupsComplete.Load())
	is.NoErr(s.StartUpkeep(UpkeepOptions{ChunkTime: time.Millisecond}))
	deadline := time.Now().Add(time.Minute)
	for !s.rollupsComplete.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	is.True(s.rollupsComplete.Load()) // the upkeep finished the backfill
	b, err = readBackfill(ctx, s.r)
	is.NoErr(err)
	is.Equal(b.after, b.through) // complete
	checkRollups(t, s)
	checkLedger(t, s)
	checkAllUsage(t, s, r, accounts, 0)

	// Another process opening it now reads the roll-ups alone.
	is.NoErr(s.Close())
	s = openTestStore(t, legacy, Options{Now: clock.Now})
	is.True(s.rollupsComplete.Load())
}

func TestBackfill_NewDatabaseIsComplete(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	is.True(s.rollupsComplete.Load()) // nothing to backfill on a database born with roll-ups
	b, err := readBackfill(context.Background(), s.r)
	is.NoErr(err)
	is.Equal(b, backfill{}) // 0, 0
}

func TestSpanParts(t *testing.T) {
	d := func(y int, m time.Month, day int) int32 { return dayNumber(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) }
	tests := []struct {
		name     string
		from, to int32
		want     []spanPart
	}{
		{"all time", minDay, maxDay, []spanPart{{spanYear, minDay, maxDay}}},
		{"since a day", d(2025, 3, 10), maxDay, []spanPart{
			{spanDay, d(2025, 3, 10), d(2025, 4, 1)}, {spanMonth, d(2025, 4, 1), d(2026, 1, 1)}, {spanDay, d(2026, 1, 1), d(2026, 1, 1)},
			{spanYear, d(2026, 1, 1), maxDay}}},
		{"until a day", minDay, d(2025, 3, 10), []spanPart{
			{spanYear, minDay, d(2025, 1, 1)},
			{spanDay, d(2025, 1, 1), d(2025, 1, 1)}, {spanMonth, d(2025, 1, 1), d(2025, 3, 1)}, {spanDay, d(2025, 3, 1), d(2025, 3, 10)}}},
		{"one day", d(2025, 3, 10), d(2025, 3, 11), []spanPart{{spanDay, d(2025, 3, 10), d(2025, 3, 11)}}},
		{"a week across months", d(2025, 2, 26), d(2025, 3, 5), []spanPart{{spanDay, d(2025, 2, 26), d(2025, 3, 5)}}},
		{"a whole month", d(2025, 2, 1), d(2025, 3, 1), []spanPart{
			{spanDay, d(2025, 2, 1), d(2025, 2, 1)}, {spanMonth, d(2025, 2, 1), d(2025, 3, 1)}, {spanDay, d(2025, 3, 1), d(2025, 3, 1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(spanParts(tt.from, tt.to), tt.want)
		})
	}
}

// TestBackfill_TwoProcessesCountOnce runs the backfill of one database from
// two stores at once (as two processes could), in small chunks: whichever
// commits a chunk first wins it, the other notices and goes on from there,
// and every generation is rolled up exactly once.
func TestBackfill_TwoProcessesCountOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	src, clock := newTestStore(t)
	randomWorkload(t, src, clock, r, 1000)
	is.NoErr(src.Close())
	legacy := filepath.Join(t.TempDir(), "legacy.db")
	legacyCopy(t, src.path, legacy)

	stores := []*Store{openTestStore(t, legacy, Options{Now: clock.Now}), openTestStore(t, legacy, Options{Now: clock.Now})}
	var wg sync.WaitGroup
	rolled := make([]int, len(stores))
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs rollupSums
			for {
				// At most 300 rowids, and fewer once 50 daily rows are
				// summed: many small chunks, so the two race often.
				ch, err := s.backfillChunk(ctx, 300, 50, &rs, nil)
				if err != nil {
					t.Error(err)
					return
				}
				rolled[i] += ch.rolled
				if ch.left == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	b, err := readBackfill(ctx, stores[0].r)
	is.NoErr(err)
	is.True(b.complete())
	is.Equal(rolled[0]+rolled[1], 1000) // each generation rolled up by one of them
	checkRollups(t, stores[0])
}

// TestMigration0007_UsagePeriodsChecks upgrades a ledger whose usage_periods
// has the checks of migration 0003 (axis IN (…), span IN (…)): opening it
// rebuilds the table with the comparison checks of 0007, keeping every row,
// and the rebuilt table refuses what the old one refused.
func TestMigration0007_UsagePeriodsChecks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, Options{Now: clock.Now})
	r := rand.New(rand.NewPCG(7, 7))
	accounts := randomWorkload(t, s, clock, r, 400)

	// The table as 0003 made it, holding the same rows, and 0007 not yet
	// applied: the database of a svcgw from before 0007.
	const rows = `SELECT account_id, axis, span, first_day, bucket, requests, input_tokens, output_tokens,
		cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros FROM usage_periods`
	for _, q := range []string{
		tableOf(t, 3, "usage_periods", "usage_periods_0003"),
		`INSERT INTO usage_periods_0003 ` + rows,
		`DROP TABLE usage_periods`,
		`ALTER TABLE usage_periods_0003 RENAME TO usage_periods`,
		`DELETE FROM schema_migrations WHERE version = 7`,
	} {
		execSQL(t, s, q)
	}
	before := queryInt(t, s, `SELECT COUNT(*) FROM usage_periods`)
	is.True(before > 100) // rows of every axis and span to carry over
	var old string
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'usage_periods'`).Scan(&old))
	is.True(strings.Contains(old, "axis IN (")) // the checks as 0003 wrote them
	is.NoErr(s.Close())

	s = openTestStore(t, path, Options{Now: clock.Now})
	is.Equal(queryInt(t, s, `SELECT COUNT(*) FROM schema_migrations WHERE version = 7`), int64(1)) // 0007 applied
	var ddl string
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'usage_periods'`).Scan(&ddl))
	is.True(!strings.Contains(ddl, " IN ("))                                          // the comparison checks
	is.True(strings.Contains(ddl, "span = 'day' OR span = 'month' OR span = 'year'")) // of 0007
	is.Equal(queryInt(t, s, `SELECT COUNT(*) FROM usage_periods`), before)            // every row kept
	checkRollups(t, s)                                                                // with the same sums
	checkAllUsage(t, s, r, accounts, 3)

	// The new checks refuse what the old ones did.
	a := accounts[0].ID
	for _, bad := range [][2]string{{"week", "day"}, {"", "day"}, {"DAY", "day"}, {"api_key", "week"}, {"api_key", ""}, {"day", "Month"}} {
		_, err := s.w.ExecContext(ctx, `INSERT INTO usage_periods VALUES (?, ?, ?, 1, '', 1, 0, 0, 0, 0, 0, 0)`, a, bad[0], bad[1])
		is.True(err != nil && strings.Contains(err.Error(), "CHECK constraint failed")) // a bad axis or span
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO usage_periods VALUES (?, 'api_key', 'year', 1, '', 1, 0, 0, 0, 0, 0, -1)`, a)
	is.True(err != nil && strings.Contains(err.Error(), "CHECK constraint failed")) // a negative cost

	// The ledger goes on adding to the rebuilt table.
	var k Key
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT id, account_id FROM api_keys LIMIT 1`).Scan(&k.ID, &k.AccountID))
	for i := range 50 {
		g := gen(t, fmt.Sprint("after-", i), k, "0.001")
		g.RequestType = []string{"flash", "pro", "code"}[i%3]
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	checkRollups(t, s)
	checkLedger(t, s)
}

// tableOf is the CREATE TABLE statement of table in the shipped migration
// of version, naming the table as: the table as that migration made it.
func tableOf(t *testing.T, version int, table, as string) string {
	t.Helper()
	ms, err := sqliteMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version != version {
			continue
		}
		head := "CREATE TABLE " + table + " ("
		i := strings.Index(m.sql, head)
		if i < 0 {
			break
		}
		create, _, _ := strings.Cut(m.sql[i:], ";")
		return "CREATE TABLE " + as + " (" + create[len(head):]
	}
	t.Fatalf("migration %d creates no table %s", version, table)
	return ""
}
