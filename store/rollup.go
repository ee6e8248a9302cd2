package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Usage roll-ups (migration 0003, docs/ledger-scale.md).
//
// The ledger writer adds every batch of generations to two tables in the
// transaction that inserts them, so the roll-ups are exact at every commit:
//
//   - usage_daily, one row per (account, UTC day, key, application, request
//     type): the finest roll-up, the one every other grouping derives from;
//   - usage_periods, the same sums per (account, axis, span, first day,
//     bucket): for each of the four axes /usage groups by, per UTC day,
//     month and year. A report over any range reads whole years, whole
//     months and the days at the range's edges, so its cost grows with the
//     number of buckets (keys, applications, request types, days shown),
//     not with the calls ever made.
//
// Both are aggregated in Go per batch (rollupSums), like spend_daily, and
// written with multi-row upserts.

// The axes of usage_periods: the groupings of /usage.
const (
	axisDay         = GroupByDay
	axisRequestType = GroupByRequestType
	axisApplication = GroupByApplication
	axisAPIKey      = GroupByAPIKey
)

// The spans of usage_periods.
const (
	spanDay   = "day"
	spanMonth = "month"
	spanYear  = "year"
)

// usageSums are the figures of one roll-up row.
type usageSums struct {
	requests   int64
	input      int64 // prompt tokens, cached and cache-write ones included
	output     int64 // completion tokens, reasoning included
	cached     int64
	cacheWrite int64
	reasoning  int64
	cost       int64 // micro-dollars
}

func (u *usageSums) add(r *genRow) {
	g := &r.g
	u.requests++
	u.input += int64(g.PromptTokens)
	u.output += int64(g.CompletionTokens)
	u.cached += int64(g.CachedPromptTokens)
	u.cacheWrite += int64(g.CacheCreationTokens)
	u.reasoning += int64(g.ReasoningTokens)
	u.cost += r.costMicros
}

func (u *usageSums) plus(v usageSums) {
	u.requests += v.requests
	u.input += v.input
	u.output += v.output
	u.cached += v.cached
	u.cacheWrite += v.cacheWrite
	u.reasoning += v.reasoning
	u.cost += v.cost
}

// dailyKey is the key of a usage_daily row.
type dailyKey struct {
	account int64
	day     int32
	key     string
	app     string
	typ     string
}

// periodKey is the key of a usage_periods row.
type periodKey struct {
	account int64
	axis    string
	span    string
	first   int32
	bucket  string
}

// rollupSums is the roll-up of one batch of generations, reused between
// batches. The zero value is ready to use.
type rollupSums struct {
	daily   map[dailyKey]usageSums
	periods map[periodKey]usageSums
	args    []any
	// The keys of the maps in primary-key order, reused: upserting in
	// that order keeps each B-tree seek near the last one (a fifth less
	// CPU than map order, BenchmarkRecordGeneration_ManyKeys).
	dailyKeys  []dailyKey
	periodKeys []periodKey
	// The month and year of the last day asked about: consecutive daily
	// rows are nearly always of the same day.
	lastDay, lastMonth, lastYear int32
	haveLast                     bool
}

// sum empties the sums and adds up rows in them.
func (rs *rollupSums) sum(rows []genRow) {
	rs.reset()
	for i := range rows {
		rs.add(&rows[i])
	}
	rs.derivePeriods()
}

// reset empties the sums for the next batch.
func (rs *rollupSums) reset() {
	if rs.daily == nil {
		rs.daily = make(map[dailyKey]usageSums)
		rs.periods = make(map[periodKey]usageSums)
	}
	clear(rs.daily)
	clear(rs.periods)
}

// add counts r in its usage_daily row; derivePeriods then derives the
// usage_periods rows from those, so a batch costs one map update per
// generation and ten per distinct daily row.
func (rs *rollupSums) add(r *genRow) {
	g := &r.g
	k := dailyKey{account: g.AccountID, day: dayNumber(g.CreatedAt), key: g.KeyID, app: g.Application, typ: g.RequestType}
	sum := rs.daily[k]
	sum.add(r)
	rs.daily[k] = sum
}

// derivePeriods fills periods from daily; call it once all the rows are
// added, before write.
func (rs *rollupSums) derivePeriods() {
	for k, v := range rs.daily {
		month, year := rs.periodsOf(k.day)
		rs.addPeriod(v, periodKey{account: k.account, axis: axisDay, span: spanDay, first: k.day})
		for _, ax := range [...]struct{ axis, bucket string }{
			{axisRequestType, k.typ},
			{axisApplication, k.app},
			{axisAPIKey, k.key},
		} {
			rs.addPeriod(v, periodKey{account: k.account, axis: ax.axis, span: spanDay, first: k.day, bucket: ax.bucket})
			rs.addPeriod(v, periodKey{account: k.account, axis: ax.axis, span: spanMonth, first: month, bucket: ax.bucket})
			rs.addPeriod(v, periodKey{account: k.account, axis: ax.axis, span: spanYear, first: year, bucket: ax.bucket})
		}
	}
}

func (rs *rollupSums) addPeriod(v usageSums, k periodKey) {
	sum := rs.periods[k]
	sum.plus(v)
	rs.periods[k] = sum
}

// periodsOf returns the day numbers of the first days of day's UTC month
// and year.
func (rs *rollupSums) periodsOf(day int32) (month, year int32) {
	if !rs.haveLast || day != rs.lastDay {
		rs.lastDay, rs.lastMonth, rs.lastYear, rs.haveLast = day, monthStart(day), yearStart(day), true
	}
	return rs.lastMonth, rs.lastYear
}

// monthStart is the day number of the first day of day's UTC month.
func monthStart(day int32) int32 {
	return dayNumber(startOfMonth(dayTime(day)))
}

// yearStart is the day number of January 1 of day's UTC year.
func yearStart(day int32) int32 {
	return dayNumber(time.Date(dayTime(day).Year(), time.January, 1, 0, 0, 0, 0, time.UTC))
}

// dayTime is 00:00 UTC of a day number.
func dayTime(day int32) time.Time {
	return time.Unix(int64(day)*86400, 0).UTC()
}

// upsertChunks are the row counts of the multi-row upserts: a batch's rows
// go in chunks of 64, and the rest in powers of two, so that seven
// statements per table cover every count.
var upsertChunks = [...]int{64, 32, 16, 8, 4, 2, 1}

// dailyUpsertSQL and periodUpsertSQL hold the upsert text per chunk size.
var dailyUpsertSQL, periodUpsertSQL = buildUpsertSQL(
	`INSERT INTO usage_daily (account_id, day, key_id, application, request_type,`,
	`(account_id, day, key_id, application, request_type)`, 5),
	buildUpsertSQL(
		`INSERT INTO usage_periods (account_id, axis, span, first_day, bucket,`,
		`(account_id, axis, span, first_day, bucket)`, 5)

func buildUpsertSQL(head, conflict string, keyCols int) map[int]string {
	const sums = ` requests, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros) VALUES `
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", keyCols+7), ", ") + ")"
	tail := ` ON CONFLICT ` + conflict + ` DO UPDATE SET
	requests = requests + excluded.requests,
	input_tokens = input_tokens + excluded.input_tokens,
	output_tokens = output_tokens + excluded.output_tokens,
	cached_input_tokens = cached_input_tokens + excluded.cached_input_tokens,
	cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
	reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
	cost_micros = cost_micros + excluded.cost_micros`
	m := make(map[int]string, len(upsertChunks))
	for _, n := range upsertChunks {
		m[n] = head + sums + strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ") + tail
	}
	return m
}

// execFunc runs one statement of a roll-up write inside the caller's
// transaction.
type execFunc func(ctx context.Context, query string, args []any) error

// write upserts the sums into usage_daily and usage_periods.
func (rs *rollupSums) write(ctx context.Context, exec execFunc) error {
	args := rs.args[:0]
	dks := rs.dailyKeys[:0]
	for k := range rs.daily {
		dks = append(dks, k)
	}
	slices.SortFunc(dks, compareDaily)
	for _, k := range dks {
		v := rs.daily[k]
		// Values as the driver takes them (int64, not int32: see
		// commitBatch).
		args = append(args, k.account, int64(k.day), k.key, k.app, k.typ,
			v.requests, v.input, v.output, v.cached, v.cacheWrite, v.reasoning, v.cost)
	}
	if err := execChunks(ctx, exec, dailyUpsertSQL, args); err != nil {
		return fmt.Errorf("usage_daily: %w", err)
	}
	args = args[:0]
	pks := rs.periodKeys[:0]
	for k := range rs.periods {
		pks = append(pks, k)
	}
	slices.SortFunc(pks, comparePeriod)
	for _, k := range pks {
		v := rs.periods[k]
		args = append(args, k.account, k.axis, k.span, int64(k.first), k.bucket,
			v.requests, v.input, v.output, v.cached, v.cacheWrite, v.reasoning, v.cost)
	}
	if err := execChunks(ctx, exec, periodUpsertSQL, args); err != nil {
		return fmt.Errorf("usage_periods: %w", err)
	}
	clear(args[:cap(args)]) // drop references for the GC
	clear(dks)
	clear(pks)
	rs.args, rs.dailyKeys, rs.periodKeys = args[:0], dks[:0], pks[:0]
	return nil
}

// compareDaily orders usage_daily keys as the table's primary key does.
func compareDaily(a, b dailyKey) int {
	return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.day, b.day), strings.Compare(a.key, b.key),
		strings.Compare(a.app, b.app), strings.Compare(a.typ, b.typ))
}

// comparePeriod orders usage_periods keys as the table's primary key does.
func comparePeriod(a, b periodKey) int {
	return cmp.Or(cmp.Compare(a.account, b.account), strings.Compare(a.axis, b.axis), strings.Compare(a.span, b.span),
		cmp.Compare(a.first, b.first), strings.Compare(a.bucket, b.bucket))
}

// upsertColumns is the number of columns, so of arguments, per upserted
// row of either table.
const upsertColumns = 12

// execChunks upserts the rows in args (upsertColumns arguments each) with
// the fewest statements of bySize.
func execChunks(ctx context.Context, exec execFunc, bySize map[int]string, args []any) error {
	for rows := len(args) / upsertColumns; rows > 0; {
		size := chunkFor(rows)
		if err := exec(ctx, bySize[size], args[:size*upsertColumns]); err != nil {
			return err
		}
		args = args[size*upsertColumns:]
		rows -= size
	}
	return nil
}

// chunkFor is the largest upsert chunk size not above n (n > 0).
func chunkFor(n int) int {
	for _, size := range upsertChunks {
		if size <= n {
			return size
		}
	}
	return 1
}
