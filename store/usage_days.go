package store

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// DayBucket is one cell of a usage report grouped by UTC day and one more
// axis: Day is YYYY-MM-DD, Bucket.Bucket the request type, application or
// key id.
type DayBucket struct {
	Day string
	Bucket
}

// UsageByDay returns the account's usage in q's window grouped by UTC day
// and by q.GroupBy, which is one of GroupByRequestType, GroupByApplication
// or GroupByAPIKey (else ErrInvalid): one bucket per day and group that has
// usage, ordered by day, then bucket. It is what a chart of spend per day,
// stacked by one axis, needs. Like Usage it reads the roll-ups (the day
// rows of the axis in usage_periods, one key range), and the generations a
// backfill has not reached yet in the same snapshot; sums are exact. It
// reads what is committed: call Sync first to see generations recorded
// just before.
func (s *Policy) UsageByDay(ctx context.Context, accountID int64, q UsageQuery) ([]DayBucket, error) {
	if q.GroupBy == GroupByDay {
		return nil, fmt.Errorf("usage by day: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	if !groupings[q.GroupBy] {
		return nil, fmt.Errorf("usage by day: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	q, from, to, err := dayRange(q)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	var sums map[DayCell]*UsageSums
	if bf, ok := s.db.(Backfiller); ok && !s.rollupsComplete.Load() {
		sums, err = bf.UsageByDayBackfilling(ctx, accountID, q, from, to)
	} else {
		sums, err = UsageDayRollups(ctx, s.db.Readers(), accountID, q.GroupBy, from, to)
	}
	if err != nil {
		return nil, err
	}
	return dayBucketsOf(sums), nil
}

// DayCell names one cell of a day × axis report.
type DayCell struct {
	Day    int32
	Bucket string
}

// UsageDayRollups sums the account's day rows of the axis over [from, to).
func UsageDayRollups(ctx context.Context, db Conn, accountID int64, axis string, from, to int32) (map[DayCell]*UsageSums, error) {
	if from >= to {
		return make(map[DayCell]*UsageSums), nil
	}
	rows, err := db.Query(ctx, usageDaySQL, accountID, axis, spanDay, from, to)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	defer rows.Close()
	return sumDayRows(rows)
}

// usageDaySQL reads the day rows of one axis of an account over a range.
const usageDaySQL = `SELECT first_day, bucket, ` + periodSums + ` FROM usage_periods
	WHERE account_id = ? AND axis = ? AND span = ? AND first_day >= ? AND first_day < ?`

// sumDayRows adds up the rows of a usageDaySQL query by day and bucket.
func sumDayRows(rows rowScanner) (map[DayCell]*UsageSums, error) {
	sums := make(map[DayCell]*UsageSums)
	var slice Slicer // see sumUsageRows
	for rows.Next() {
		slice.Yield()
		var (
			c DayCell
			v UsageSums
		)
		if err := rows.Scan(&c.Day, &c.Bucket, &v.Requests, &v.Input, &v.Output, &v.Cached, &v.CacheWrite, &v.Reasoning, &v.Cost); err != nil {
			return nil, fmt.Errorf("usage by day: scan: %w", err)
		}
		if sum := sums[c]; sum != nil {
			sum.Plus(v)
		} else {
			sums[c] = &v
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	return sums, nil
}

// dayBucketsOf renders sums by day, then bucket (bytewise).
func dayBucketsOf(sums map[DayCell]*UsageSums) []DayBucket {
	out := make([]DayBucket, 0, len(sums))
	for c, v := range sums {
		out = append(out, DayBucket{Day: dayTime(c.Day).Format(time.DateOnly), Bucket: v.bucket(c.Bucket)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Bucket.Bucket < out[j].Bucket.Bucket
	})
	return out
}
