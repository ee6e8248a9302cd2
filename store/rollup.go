package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Usage roll-ups (migration 0003, docs/ledger.md).
//
// The ledger writer adds every batch of generations to two tables in the
// transaction that inserts them, so the roll-ups are exact at every commit:
//
//   - usage_daily, one row per (account, UTC day, key, application, request
//     type): the finest roll-up, the one every other grouping derives from;
//   - usage_periods, the same sums per (account, axis, span, first day,
//     bucket): for each of the four axes /usage groups by, per UTC day and
//     per UTC month. A report over any range reads whole months plus the
//     days at the range's edges, so its cost grows with the number of
//     buckets (keys, applications, request types, days shown), not with the
//     calls ever made.
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
	// The month of the last day asked about: consecutive generations are
	// nearly always of the same day.
	lastDay, lastMonth int32
	haveLast           bool
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

// add counts r in every roll-up row it belongs to.
func (rs *rollupSums) add(r *genRow) {
	g := &r.g
	day := dayNumber(g.CreatedAt)
	month := rs.monthOf(day)
	k := dailyKey{account: g.AccountID, day: day, key: g.KeyID, app: g.Application, typ: g.RequestType}
	sum := rs.daily[k]
	sum.add(r)
	rs.daily[k] = sum
	rs.addPeriod(r, periodKey{account: g.AccountID, axis: axisDay, span: spanDay, first: day})
	for _, ax := range [...]struct{ axis, bucket string }{
		{axisRequestType, g.RequestType},
		{axisApplication, g.Application},
		{axisAPIKey, g.KeyID},
	} {
		rs.addPeriod(r, periodKey{account: g.AccountID, axis: ax.axis, span: spanDay, first: day, bucket: ax.bucket})
		rs.addPeriod(r, periodKey{account: g.AccountID, axis: ax.axis, span: spanMonth, first: month, bucket: ax.bucket})
	}
}

func (rs *rollupSums) addPeriod(r *genRow, k periodKey) {
	sum := rs.periods[k]
	sum.add(r)
	rs.periods[k] = sum
}

// monthOf is the day number of the first day of day's UTC month.
func (rs *rollupSums) monthOf(day int32) int32 {
	if !rs.haveLast || day != rs.lastDay {
		rs.lastDay, rs.lastMonth, rs.haveLast = day, monthStart(day), true
	}
	return rs.lastMonth
}

// monthStart is the day number of the first day of day's UTC month.
func monthStart(day int32) int32 {
	return dayNumber(startOfMonth(dayTime(day)))
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

// rollupStatements are every upsert statement text, for preparing.
func rollupStatements() []string {
	qs := make([]string, 0, 2*len(upsertChunks))
	for _, n := range upsertChunks {
		qs = append(qs, dailyUpsertSQL[n], periodUpsertSQL[n])
	}
	return qs
}

// execFunc runs one statement of a roll-up write inside the caller's
// transaction.
type execFunc func(ctx context.Context, query string, args []any) error

// write upserts the sums into usage_daily and usage_periods.
func (rs *rollupSums) write(ctx context.Context, exec execFunc) error {
	args := rs.args[:0]
	for k, v := range rs.daily {
		args = append(args, k.account, k.day, k.key, k.app, k.typ,
			v.requests, v.input, v.output, v.cached, v.cacheWrite, v.reasoning, v.cost)
	}
	if err := execChunks(ctx, exec, dailyUpsertSQL, args); err != nil {
		return fmt.Errorf("usage_daily: %w", err)
	}
	args = args[:0]
	for k, v := range rs.periods {
		args = append(args, k.account, k.axis, k.span, k.first, k.bucket,
			v.requests, v.input, v.output, v.cached, v.cacheWrite, v.reasoning, v.cost)
	}
	if err := execChunks(ctx, exec, periodUpsertSQL, args); err != nil {
		return fmt.Errorf("usage_periods: %w", err)
	}
	clear(args[:cap(args)]) // drop references for the GC
	rs.args = args[:0]
	return nil
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

// prepareRollups prepares the roll-up upserts on the writer connection for
// the ledger's statement cache. Like every s.stmt call, it must run outside
// a transaction.
func (s *Store) prepareRollups(ctx context.Context) error {
	for _, q := range rollupStatements() {
		if _, err := s.stmt(ctx, q); err != nil {
			return fmt.Errorf("ledger: prepare roll-ups: %w", err)
		}
	}
	return nil
}
