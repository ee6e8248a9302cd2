package store

import (
	"time"
)

// Spend is what an account, and one of its keys, has been charged: every
// generation handed to RecordGeneration, committed or still queued (held in
// memory while the database fails included), less the ones the ledger
// dropped as unstorable. Amounts are micro-dollars. The periods are the UTC
// calendar day and month containing the time Spend was asked about.
type Spend struct {
	// Total is every charge the account has ever had (its total_used once
	// the ledger has caught up).
	Total int64
	// AccountDay and AccountMonth are the account's charges in the day and
	// the month, over all of its keys.
	AccountDay, AccountMonth int64
	// KeyDay and KeyMonth are the key's charges in the day and the month;
	// zero when no key was asked about.
	KeyDay, KeyMonth int64
}

// Period is a UTC day and the month containing it, as day numbers.
type Period struct {
	Day                  int32
	MonthStart, MonthEnd int32 // [monthStart, monthEnd)
}

func PeriodOf(t time.Time) Period {
	m := StartOfMonth(t)
	return Period{Day: DayNumber(t), MonthStart: DayNumber(m), MonthEnd: DayNumber(m.AddDate(0, 1, 0))}
}

// DayNumber is t's UTC day as a count of days since 1970-01-01, the day
// column of spend_daily.
func DayNumber(t time.Time) int32 {
	return int32(floorDiv(t.Unix(), 86400))
}

// StartOfMonth is 00:00 UTC on the first day of t's UTC month.
func StartOfMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
