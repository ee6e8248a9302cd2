package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// CheckRollups asserts that every roll-up holds exactly the sums of the
// generations (usage_daily per account, day, key, application and request
// type; usage_periods per axis, span and bucket), and that spend_daily,
// which spend caps read, agrees with usage_periods. Only valid once the
// backfill is complete and before retention has deleted anything.
func CheckRollups(t testing.TB, s store.DB) {
	t.Helper()
	const sums = `COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_prompt_tokens),
		SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros)`
	const cols = `requests, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros`
	// The generations' day, month and year, as day numbers, in SQL.
	const day = `(created_at / 86400000)`
	month := EngineSQL(t, s, `(unixepoch(date(created_at / 1000, 'unixepoch', 'start of month')) / 86400)`,
		`(extract(epoch FROM date_trunc('month', to_timestamp(created_at / 1000) AT TIME ZONE 'UTC'))::bigint / 86400)`)
	year := EngineSQL(t, s, `(unixepoch(date(created_at / 1000, 'unixepoch', 'start of year')) / 86400)`,
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
	if n := QueryInt(t, s, `SELECT COUNT(*) FROM usage_periods WHERE axis = 'day' AND span != 'day'`); n != 0 {
		t.Errorf("usage_periods has %d month or year rows of axis day, want none", n)
	}
	for name, c := range checks {
		for _, q := range []string{c.a + ` EXCEPT ` + c.b, c.b + ` EXCEPT ` + c.a} {
			if bad := QueryInt(t, s, `SELECT COUNT(*) FROM (`+q+`) x`); bad != 0 {
				t.Errorf("%s disagrees with generations on %d rows", name, bad)
			}
		}
	}
}

// usageFromGenerations is the usage report computed the slow way, over
// generations, as svcgw did before roll-ups: what Usage must equal.
func usageFromGenerations(t testing.TB, s store.DB, accountID int64, q store.UsageQuery) []store.Bucket {
	t.Helper()
	where, args := `account_id = ?`, []any{accountID}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, store.Millis(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, store.Millis(q.End))
	}
	expr := map[string]string{
		store.GroupByDay: EngineSQL(t, s, `strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')`,
			`to_char(to_timestamp(created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`),
		store.GroupByRequestType: `request_type`,
		store.GroupByApplication: `application`,
		store.GroupByAPIKey:      `COALESCE(key_id, '')`,
	}[q.GroupBy]
	out := []store.Bucket{}
	Query(t, s, `SELECT `+expr+` AS bucket, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),
		SUM(cached_prompt_tokens), SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros)
		FROM generations WHERE `+where+` GROUP BY 1`, args, func(r store.Scanner) error {
		var (
			b    store.Bucket
			cost int64
		)
		if err := r.Scan(&b.Bucket, &b.Requests, &b.InputTokens, &b.OutputTokens, &b.CachedInputTokens,
			&b.CacheWriteTokens, &b.ReasoningTokens, &cost); err != nil {
			return err
		}
		b.TotalTokens = b.InputTokens + b.OutputTokens
		b.Cost = money.Micros(cost).Decimal()
		out = append(out, b)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket < out[j].Bucket })
	return out
}

// SameBuckets compares two reports field by field (costs by value).
func SameBuckets(got, want []store.Bucket) error {
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

// UsageRanges are day-aligned windows around the generations of
// randomWorkload, chosen to cover unbounded sides, single days, weeks, whole
// and partial months and years, a year's end and empty windows, and random
// more of them.
func UsageRanges(r *rand.Rand, first, last time.Time, random int) [][2]time.Time {
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

// RandomWorkload records n generations spread over accounts, keys,
// applications, request types and ~four months (Nov 2024 – Mar 2025, so a
// year's end too), with zero-cost (failed) and cached calls, syncing now
// and then so that batches vary. It returns the accounts.
func RandomWorkload(t testing.TB, s store.DB, clock *Clock, r *rand.Rand, n int) []store.Account {
	t.Helper()
	ctx := context.Background()
	var (
		accounts []store.Account
		keys     []store.Key
	)
	for _, name := range []string{"acme", "globex", "initech"} {
		a, k, _ := NewAccount(t, s, name, "1000")
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
		g := store.Generation{
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

func testRollups_EqualGenerations(t *testing.T, open Opener) {
	s, clock := newTestDB(t, open)
	r := rand.New(rand.NewPCG(1, 2))
	accounts := RandomWorkload(t, s, clock, r, 1200)
	CheckRollups(t, s)
	CheckLedger(t, s)
	CheckAllUsage(t, s, r, accounts, 10)
}

// CheckAllUsage asserts that Usage equals the report over generations for
// every grouping of every account over the ranges of usageRanges.
func CheckAllUsage(t *testing.T, s store.DB, r *rand.Rand, accounts []store.Account, random int) {
	t.Helper()
	ctx := context.Background()
	ranges := UsageRanges(r, time.Date(2024, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 20, 0, 0, 0, 0, time.UTC), random)
	for _, a := range accounts {
		for _, groupBy := range []string{store.GroupByDay, store.GroupByRequestType, store.GroupByApplication, store.GroupByAPIKey} {
			for _, rg := range ranges {
				if !rg[0].IsZero() && !rg[1].IsZero() && rg[0].After(rg[1]) {
					continue
				}
				q := store.UsageQuery{GroupBy: groupBy, Start: rg[0], End: rg[1]}
				got, err := s.Usage(ctx, a.ID, q)
				if err != nil {
					t.Fatalf("usage %+v: %v", q, err)
				}
				want := usageFromGenerations(t, s, a.ID, q)
				if err := SameBuckets(got, want); err != nil {
					t.Errorf("account %s, group by %s, %s – %s: %v", a.Name, groupBy,
						rg[0].Format(time.DateOnly), rg[1].Format(time.DateOnly), err)
				}
				if groupBy != store.GroupByDay {
					continue
				}
				// The account's total (the management API's usage by
				// account) is every bucket added up.
				total, err := s.UsageTotal(ctx, a.ID, q)
				if err != nil {
					t.Fatalf("usage total %+v: %v", q, err)
				}
				if err := SameBuckets([]store.Bucket{total}, []store.Bucket{sumBuckets(t, want)}); err != nil {
					t.Errorf("account %s, total, %s – %s: %v", a.Name,
						rg[0].Format(time.DateOnly), rg[1].Format(time.DateOnly), err)
				}
			}
		}
	}
}

// sumBuckets adds buckets up into one, named "".
func sumBuckets(t *testing.T, buckets []store.Bucket) store.Bucket {
	t.Helper()
	sum := store.Bucket{Cost: money.Micros(0).Decimal()} // as the store renders amounts
	for _, b := range buckets {
		sum.Requests += b.Requests
		sum.InputTokens += b.InputTokens
		sum.OutputTokens += b.OutputTokens
		sum.TotalTokens += b.TotalTokens
		sum.CachedInputTokens += b.CachedInputTokens
		sum.CacheWriteTokens += b.CacheWriteTokens
		sum.ReasoningTokens += b.ReasoningTokens
		var c apd.Decimal
		if _, err := apd.BaseContext.Add(&c, &sum.Cost, &b.Cost); err != nil {
			t.Fatal(err)
		}
		sum.Cost = c
	}
	return sum
}
