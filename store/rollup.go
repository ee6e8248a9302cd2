package store

import (
	"cmp"
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
// Both are aggregated in Go per batch (RollupSums), like spend_daily, and
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

// UsageSums are the figures of one roll-up row.
type UsageSums struct {
	Requests   int64
	Input      int64 // prompt tokens, cached and cache-write ones included
	Output     int64 // completion tokens, reasoning included
	Cached     int64
	CacheWrite int64
	Reasoning  int64
	Cost       int64 // micro-dollars
}

func (u *UsageSums) add(r *GenRow) {
	g := &r.Gen
	u.Requests++
	u.Input += int64(g.PromptTokens)
	u.Output += int64(g.CompletionTokens)
	u.Cached += int64(g.CachedPromptTokens)
	u.CacheWrite += int64(g.CacheCreationTokens)
	u.Reasoning += int64(g.ReasoningTokens)
	u.Cost += r.CostMicros
}

func (u *UsageSums) Plus(v UsageSums) {
	u.Requests += v.Requests
	u.Input += v.Input
	u.Output += v.Output
	u.Cached += v.Cached
	u.CacheWrite += v.CacheWrite
	u.Reasoning += v.Reasoning
	u.Cost += v.Cost
}

// DailyKey is the key of a usage_daily row.
type DailyKey struct {
	Account int64
	Day     int32
	Key     string
	App     string
	Type    string
}

// PeriodKey is the key of a usage_periods row.
type PeriodKey struct {
	Account int64
	Axis    string
	Span    string
	First   int32
	Bucket  string
}

// RollupSums is the roll-up of one batch of generations, reused between
// batches. The zero value is ready to use.
type RollupSums struct {
	Daily   map[DailyKey]UsageSums
	Periods map[PeriodKey]UsageSums
	// The month and year of the last day asked about: consecutive daily
	// rows are nearly always of the same day.
	lastDay, lastMonth, lastYear int32
	haveLast                     bool
}

// sum empties the sums and adds up rows in them.
func (rs *RollupSums) sum(rows []GenRow) {
	rs.Reset()
	for i := range rows {
		rs.Add(&rows[i])
	}
	rs.DerivePeriods()
}

// Reset empties the sums for the next batch.
func (rs *RollupSums) Reset() {
	if rs.Daily == nil {
		rs.Daily = make(map[DailyKey]UsageSums)
		rs.Periods = make(map[PeriodKey]UsageSums)
	}
	clear(rs.Daily)
	clear(rs.Periods)
}

// Add counts r in its usage_daily row; DerivePeriods then derives the
// usage_periods rows from those, so a batch costs one map update per
// generation and ten per distinct daily row.
func (rs *RollupSums) Add(r *GenRow) {
	g := &r.Gen
	k := DailyKey{Account: g.AccountID, Day: DayNumber(g.CreatedAt), Key: g.KeyID, App: g.Application, Type: g.RequestType}
	sum := rs.Daily[k]
	sum.add(r)
	rs.Daily[k] = sum
}

// DerivePeriods fills periods from daily; call it once all the rows are
// added, before write.
func (rs *RollupSums) DerivePeriods() {
	for k, v := range rs.Daily {
		month, year := rs.periodsOf(k.Day)
		rs.addPeriod(v, PeriodKey{Account: k.Account, Axis: axisDay, Span: spanDay, First: k.Day})
		for _, ax := range [...]struct{ axis, bucket string }{
			{axisRequestType, k.Type},
			{axisApplication, k.App},
			{axisAPIKey, k.Key},
		} {
			rs.addPeriod(v, PeriodKey{Account: k.Account, Axis: ax.axis, Span: spanDay, First: k.Day, Bucket: ax.bucket})
			rs.addPeriod(v, PeriodKey{Account: k.Account, Axis: ax.axis, Span: spanMonth, First: month, Bucket: ax.bucket})
			rs.addPeriod(v, PeriodKey{Account: k.Account, Axis: ax.axis, Span: spanYear, First: year, Bucket: ax.bucket})
		}
	}
}

func (rs *RollupSums) addPeriod(v UsageSums, k PeriodKey) {
	sum := rs.Periods[k]
	sum.Plus(v)
	rs.Periods[k] = sum
}

// periodsOf returns the day numbers of the first days of day's UTC month
// and year.
func (rs *RollupSums) periodsOf(day int32) (month, year int32) {
	if !rs.haveLast || day != rs.lastDay {
		rs.lastDay, rs.lastMonth, rs.lastYear, rs.haveLast = day, monthStart(day), yearStart(day), true
	}
	return rs.lastMonth, rs.lastYear
}

// monthStart is the day number of the first day of day's UTC month.
func monthStart(day int32) int32 {
	return DayNumber(StartOfMonth(dayTime(day)))
}

// yearStart is the day number of January 1 of day's UTC year.
func yearStart(day int32) int32 {
	return DayNumber(time.Date(dayTime(day).Year(), time.January, 1, 0, 0, 0, 0, time.UTC))
}

// dayTime is 00:00 UTC of a day number.
func dayTime(day int32) time.Time {
	return time.Unix(int64(day)*86400, 0).UTC()
}

// CompareDaily orders usage_daily keys as the table's primary key does.
func CompareDaily(a, b DailyKey) int {
	return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Day, b.Day), strings.Compare(a.Key, b.Key),
		strings.Compare(a.App, b.App), strings.Compare(a.Type, b.Type))
}

// ComparePeriod orders usage_periods keys as the table's primary key does.
func ComparePeriod(a, b PeriodKey) int {
	return cmp.Or(cmp.Compare(a.Account, b.Account), strings.Compare(a.Axis, b.Axis), strings.Compare(a.Span, b.Span),
		cmp.Compare(a.First, b.First), strings.Compare(a.Bucket, b.Bucket))
}
