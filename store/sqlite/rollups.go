package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/svcgw/svcgw/store"
)

// The usage roll-ups' writes: a batch's (or a backfill chunk's) sums,
// upserted into usage_daily and usage_periods in primary-key order, in
// multi-row statements.

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

// rollupWriter writes roll-up sums (write), with its scratch space reused
// between writes.
type rollupWriter struct {
	args []any
	// The keys of the maps in primary-key order, reused: upserting in
	// that order keeps each B-tree seek near the last one (a fifth less
	// CPU than map order, BenchmarkRecordGeneration_ManyKeys).
	dailyKeys  []store.DailyKey
	periodKeys []store.PeriodKey
}

// write upserts the sums of rs into usage_daily and usage_periods.
func (w *rollupWriter) write(ctx context.Context, rs *store.RollupSums, exec execFunc) error {
	args := w.args[:0]
	dks := w.dailyKeys[:0]
	for k := range rs.Daily {
		dks = append(dks, k)
	}
	slices.SortFunc(dks, store.CompareDaily)
	for _, k := range dks {
		v := rs.Daily[k]
		// Values as the driver takes them (int64, not int32: see
		// CommitBatch).
		args = append(args, k.Account, int64(k.Day), k.Key, k.App, k.Type,
			v.Requests, v.Input, v.Output, v.Cached, v.CacheWrite, v.Reasoning, v.Cost)
	}
	if err := execChunks(ctx, exec, dailyUpsertSQL, args); err != nil {
		return fmt.Errorf("usage_daily: %w", err)
	}
	args = args[:0]
	pks := w.periodKeys[:0]
	for k := range rs.Periods {
		pks = append(pks, k)
	}
	slices.SortFunc(pks, store.ComparePeriod)
	for _, k := range pks {
		v := rs.Periods[k]
		args = append(args, k.Account, k.Axis, k.Span, int64(k.First), k.Bucket,
			v.Requests, v.Input, v.Output, v.Cached, v.CacheWrite, v.Reasoning, v.Cost)
	}
	if err := execChunks(ctx, exec, periodUpsertSQL, args); err != nil {
		return fmt.Errorf("usage_periods: %w", err)
	}
	clear(args[:cap(args)]) // drop references for the GC
	clear(dks)
	clear(pks)
	w.args, w.dailyKeys, w.periodKeys = args[:0], dks[:0], pks[:0]
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
