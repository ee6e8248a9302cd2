package store

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// The usage groupings, the values of UsageQuery.GroupBy.
const (
	GroupByDay         = "day"
	GroupByRequestType = "request_type"
	GroupByApplication = "application"
	GroupByAPIKey      = "api_key"
)

// groupings are the groupings Usage knows.
var groupings = map[string]bool{GroupByDay: true, GroupByRequestType: true, GroupByApplication: true, GroupByAPIKey: true}

// UsageQuery selects and groups an account's usage.
type UsageQuery struct {
	// GroupBy is one of GroupByDay, GroupByRequestType, GroupByApplication,
	// GroupByAPIKey; anything else is ErrInvalid.
	GroupBy string
	// Start (inclusive) and End (exclusive) bound the generations' creation
	// times; a zero time is unbounded. Usage is kept per UTC day, so each
	// bound must be a UTC midnight (ErrInvalid otherwise).
	Start, End time.Time
}

// Bucket is one group of a usage report.
type Bucket struct {
	// Bucket is the group key: a YYYY-MM-DD day (UTC), a request type, an
	// application label or a public key id.
	Bucket            string
	Requests          int64
	InputTokens       int64 // prompt tokens, cached ones included
	OutputTokens      int64 // completion tokens, reasoning included
	TotalTokens       int64
	CachedInputTokens int64
	CacheWriteTokens  int64 // prompt tokens written to a cache (part of InputTokens)
	ReasoningTokens   int64 // part of OutputTokens
	Cost              apd.Decimal
}

// Day numbers standing for an unbounded side of a range.
const (
	minDay int32 = math.MinInt32
	maxDay int32 = math.MaxInt32
)

// lastDay is 9999-12-31, the last day RFC 3339 can write.
var lastDay = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// IsDayBound reports whether t can bound a usage query: the zero time
// (unbounded) or a UTC midnight.
func IsDayBound(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	u := t.UTC()
	return u.Hour() == 0 && u.Minute() == 0 && u.Second() == 0 && u.Nanosecond() == 0
}

// Usage returns the account's usage in q's window, one bucket per group,
// ordered by bucket. It reads only the roll-ups (usage_periods): whole
// years, whole months and the days at the window's edges, so it costs
// about the same whatever the number of calls ever made. Sums are over
// INTEGER columns, so they are exact. It reads what is committed: call
// Sync first to see generations recorded just before.
//
// While the roll-ups of a database made before them are being backfilled
// (see StartUpkeep), the generations not reached yet are summed from the
// generations table in the same read transaction, so the answer is exact
// then too, only slower.
func (s *Policy) Usage(ctx context.Context, accountID int64, q UsageQuery) ([]Bucket, error) {
	if !groupings[q.GroupBy] {
		return nil, fmt.Errorf("usage: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	q, from, to, err := dayRange(q)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	var sums map[string]*UsageSums
	if bf, ok := s.db.(Backfiller); ok && !s.rollupsComplete.Load() {
		sums, err = bf.UsageBackfilling(ctx, accountID, q, from, to)
	} else {
		sums, err = UsageRollups(ctx, s.db.Readers(), accountID, q.GroupBy, from, to)
	}
	if err != nil {
		return nil, err
	}
	return bucketsOf(sums), nil
}

// UsageTotal returns the account's usage in q's window as one bucket,
// named "": every bucket of Usage's answer added up (q.GroupBy is not
// read). It is the management API's usage by account (the operator's top
// spenders), one read per account: the roll-up rows are added up by the
// database, in one row, instead of being read row by row, so an account
// costs about one row's read whatever its range. The range is read from
// the day axis's day rows up to a year, from the request type axis's
// years, months and days beyond (the fewer rows). While the roll-ups of a
// database made before them are being backfilled, it adds up Usage's
// answer instead.
func (s *Policy) UsageTotal(ctx context.Context, accountID int64, q UsageQuery) (Bucket, error) {
	q.GroupBy = GroupByRequestType
	q, from, to, err := dayRange(q)
	if err != nil {
		return Bucket{}, fmt.Errorf("usage: %w", err)
	}
	var v UsageSums
	if bf, ok := s.db.(Backfiller); ok && !s.rollupsComplete.Load() {
		sums, err := bf.UsageBackfilling(ctx, accountID, q, from, to)
		if err != nil {
			return Bucket{}, err
		}
		for _, b := range sums {
			v.Plus(*b)
		}
		return v.bucket(""), nil
	}
	groupBy := GroupByRequestType
	if from != minDay && to != maxDay && to-from <= 366 {
		groupBy = GroupByDay
	}
	query, args := usageRollupsSQL(accountID, groupBy, from, to)
	if query == "" {
		return v.bucket(""), nil
	}
	err = s.db.Readers().QueryRow(ctx, `SELECT `+totalOf("requests")+`, `+totalOf("input_tokens")+`, `+totalOf("output_tokens")+`,
		`+totalOf("cached_input_tokens")+`, `+totalOf("cache_write_tokens")+`, `+totalOf("reasoning_tokens")+`, `+totalOf("cost_micros")+`
		FROM (`+query+`) AS parts`, args...).
		Scan(&v.Requests, &v.Input, &v.Output, &v.Cached, &v.CacheWrite, &v.Reasoning, &v.Cost)
	if err != nil {
		return Bucket{}, fmt.Errorf("usage total: %w", s.db.ReadErr(ctx, err))
	}
	return v.bucket(""), nil
}

// totalOf is the sum of an INTEGER column as an integer on both engines
// (PostgreSQL's SUM of a BIGINT is NUMERIC), 0 over no rows.
func totalOf(col string) string { return `COALESCE(CAST(SUM(` + col + `) AS BIGINT), 0)` }

// Backfiller is an engine whose database may hold generations recorded
// before the usage roll-ups existed (SQLite's, made by an older svcgw):
// until its backfill is complete (RollupsComplete), usage reads add those
// up from the generations themselves.
type Backfiller interface {
	UsageBackfilling(ctx context.Context, accountID int64, q UsageQuery, from, to int32) (map[string]*UsageSums, error)
	UsageByDayBackfilling(ctx context.Context, accountID int64, q UsageQuery, from, to int32) (map[DayCell]*UsageSums, error)
}

// dayRange checks q's bounds and returns them as the days [from, to), an
// unbounded side as minDay or maxDay. Usage is kept per UTC day, so each
// bound must be a UTC midnight; an end on or after the last day RFC 3339
// can write (9999-12-31, however it is clamped) is none, since nothing is
// recorded then.
func dayRange(q UsageQuery) (_ UsageQuery, from, to int32, err error) {
	if !IsDayBound(q.Start) || (!IsDayBound(q.End) && q.End.Before(lastDay)) {
		return q, 0, 0, fmt.Errorf("%w: bounds must be UTC midnights (usage is kept per UTC day)", ErrInvalid)
	}
	if !q.Start.IsZero() && !q.End.IsZero() && q.Start.After(q.End) {
		return q, 0, 0, fmt.Errorf("start after end: %w", ErrInvalid)
	}
	if !q.End.IsZero() && !q.End.Before(lastDay) {
		q.End = time.Time{}
	}
	from, to = minDay, maxDay
	if !q.Start.IsZero() {
		from = clampDay(q.Start)
	}
	if !q.End.IsZero() {
		to = clampDay(q.End)
	}
	return q, from, to, nil
}

// Days returns the days q covers, [from, to), as day numbers (days since
// 1970-01-01, UTC: UsageDelta.Day), an unbounded side as math.MinInt32 or
// math.MaxInt32: a day's usage counts in q's answer iff from <= day < to.
// q's bounds are checked as Usage checks them.
func (q UsageQuery) Days() (from, to int32, err error) {
	_, from, to, err = dayRange(q)
	return from, to, err
}

// clampDay is t's day number, within the range the roll-ups use.
func clampDay(t time.Time) int32 {
	d := floorDiv(t.Unix(), 86400)
	return int32(min(max(d, int64(minDay)), int64(maxDay)))
}

const periodSums = `requests, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros`

// UsageRollups sums the account's usage_periods rows of the grouping over
// the days [from, to) (see spanParts). Each part is a range of the primary
// key; a grouping by day reads day rows only.
func UsageRollups(ctx context.Context, db Conn, accountID int64, groupBy string, from, to int32) (map[string]*UsageSums, error) {
	query, args := usageRollupsSQL(accountID, groupBy, from, to)
	if query == "" {
		return make(map[string]*UsageSums), nil
	}
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	return sumUsageRows(rows, groupBy)
}

// usageRollupsSQL is the query of UsageRollups, "" when the range is empty.
func usageRollupsSQL(accountID int64, groupBy string, from, to int32) (string, []any) {
	parts := []spanPart{{spanDay, from, to}}
	if groupBy != GroupByDay {
		parts = spanParts(from, to)
	}
	var (
		sel  []string
		args []any
	)
	for _, p := range parts {
		if p.from >= p.to {
			continue
		}
		sel = append(sel, `SELECT first_day, bucket, `+periodSums+` FROM usage_periods
			WHERE account_id = ? AND axis = ? AND span = ? AND first_day >= ? AND first_day < ?`)
		args = append(args, accountID, groupBy, p.span, p.from, p.to)
	}
	return strings.Join(sel, "\nUNION ALL\n"), args
}

// rowScanner is what *sql.Rows and pgx.Rows have in common.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// sumUsageRows adds up the roll-up rows of a usageRollupsSQL query by
// bucket.
//
// The rows are added up here rather than by a GROUP BY, so that the read
// can give up the processor between rows (a Slicer): the database produces
// them one at a time as they are asked for, and a report over thousands of
// buckets then delays a call on the same core by a slice (ReadSlice)
// instead of by its whole length (docs/ledger-scale.md).
func sumUsageRows(rows rowScanner, groupBy string) (map[string]*UsageSums, error) {
	sums := make(map[string]*UsageSums)
	var slice Slicer
	for rows.Next() {
		slice.Yield()
		var (
			first  int32
			bucket string
			v      UsageSums
		)
		if err := rows.Scan(&first, &bucket, &v.Requests, &v.Input, &v.Output, &v.Cached, &v.CacheWrite, &v.Reasoning, &v.Cost); err != nil {
			return nil, fmt.Errorf("usage: scan: %w", err)
		}
		if groupBy == GroupByDay {
			bucket = dayTime(first).Format(time.DateOnly)
		}
		if sum := sums[bucket]; sum != nil {
			sum.Plus(v)
		} else {
			sums[bucket] = &v
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return sums, nil
}

// spanPart is a range of usage_periods rows of one span: those whose first
// day is in [from, to).
type spanPart struct {
	span     string
	from, to int32
}

// spanParts covers the days [from, to) with the fewest roll-up rows: whole
// UTC years from year rows, the whole months before and after them from
// month rows, and the days left at the edges from day rows.
func spanParts(from, to int32) []spanPart {
	if y0, y1 := wholeYears(from, to); y0 < y1 {
		parts := monthParts(from, y0)
		parts = append(parts, spanPart{spanYear, y0, y1})
		return append(parts, monthParts(y1, to)...)
	}
	return monthParts(from, to)
}

// monthParts covers [from, to) with month and day rows.
func monthParts(from, to int32) []spanPart {
	if from >= to {
		return nil
	}
	if m0, m1 := wholeMonths(from, to); m0 < m1 {
		return []spanPart{{spanDay, from, m0}, {spanMonth, m0, m1}, {spanDay, m1, to}}
	}
	return []spanPart{{spanDay, from, to}}
}

// wholeYears is wholeMonths for UTC years.
func wholeYears(from, to int32) (y0, y1 int32) {
	y0, y1 = from, to
	if from != minDay {
		if y0 = yearStart(from); y0 < from {
			y0 = DayNumber(dayTime(y0).AddDate(1, 0, 0))
		}
	}
	if to != maxDay {
		y1 = yearStart(to)
	}
	return y0, y1
}

// wholeMonths returns the first and the end of the UTC months lying wholly
// within the days [from, to), as day numbers: [m0, m1); m0 >= m1 when there
// are none. An unbounded side stays unbounded.
func wholeMonths(from, to int32) (m0, m1 int32) {
	m0, m1 = from, to
	if from != minDay {
		if m0 = monthStart(from); m0 < from {
			m0 = DayNumber(dayTime(m0).AddDate(0, 1, 0))
		}
	}
	if to != maxDay {
		m1 = monthStart(to)
	}
	return m0, m1
}

// bucketsOf renders sums as buckets in bucket order (bytewise, as SQLite's
// BINARY collation orders them).
func bucketsOf(sums map[string]*UsageSums) []Bucket {
	buckets := make([]Bucket, 0, len(sums))
	for name, v := range sums {
		buckets = append(buckets, v.bucket(name))
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].Bucket < buckets[j].Bucket })
	return buckets
}

// bucket renders the sums as the bucket named name.
func (v *UsageSums) bucket(name string) Bucket {
	return Bucket{
		Bucket:            name,
		Requests:          v.Requests,
		InputTokens:       v.Input,
		OutputTokens:      v.Output,
		TotalTokens:       v.Input + v.Output,
		CachedInputTokens: v.Cached,
		CacheWriteTokens:  v.CacheWrite,
		ReasoningTokens:   v.Reasoning,
		Cost:              fromMicros(v.Cost),
	}
}
