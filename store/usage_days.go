package store

import (
	"context"
	"fmt"
	"runtime"
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
func (s *policy) UsageByDay(ctx context.Context, accountID int64, q UsageQuery) ([]DayBucket, error) {
	if q.GroupBy == GroupByDay {
		return nil, fmt.Errorf("usage by day: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	scanExpr, ok := scanExprs[q.GroupBy]
	if !ok {
		return nil, fmt.Errorf("usage by day: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	q, from, to, err := dayRange(q)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	var sums map[dayCell]*usageSums
	if bf, ok := s.db.(backfiller); ok && !s.rollupsComplete.Load() {
		sums, err = bf.usageByDayBackfilling(ctx, accountID, q, scanExpr, from, to)
	} else {
		sums, err = usageDayRollups(ctx, s.db.readers(), accountID, q.GroupBy, from, to)
	}
	if err != nil {
		return nil, err
	}
	return dayBucketsOf(sums), nil
}

// dayCell names one cell of a day × axis report.
type dayCell struct {
	day    int32
	bucket string
}

// usageDayRollups sums the account's day rows of the axis over [from, to).
func usageDayRollups(ctx context.Context, db conn, accountID int64, axis string, from, to int32) (map[dayCell]*usageSums, error) {
	if from >= to {
		return make(map[dayCell]*usageSums), nil
	}
	rows, err := db.query(ctx, usageDaySQL, accountID, axis, spanDay, from, to)
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
func sumDayRows(rows rowScanner) (map[dayCell]*usageSums, error) {
	sums := make(map[dayCell]*usageSums)
	for n := 1; rows.Next(); n++ {
		if n%yieldRows == 0 {
			runtime.Gosched() // see sumUsageRows
		}
		var (
			c dayCell
			v usageSums
		)
		if err := rows.Scan(&c.day, &c.bucket, &v.requests, &v.input, &v.output, &v.cached, &v.cacheWrite, &v.reasoning, &v.cost); err != nil {
			return nil, fmt.Errorf("usage by day: scan: %w", err)
		}
		if sum := sums[c]; sum != nil {
			sum.plus(v)
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
func dayBucketsOf(sums map[dayCell]*usageSums) []DayBucket {
	out := make([]DayBucket, 0, len(sums))
	for c, v := range sums {
		out = append(out, DayBucket{Day: dayTime(c.day).Format(time.DateOnly), Bucket: v.bucket(c.bucket)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Bucket.Bucket < out[j].Bucket.Bucket
	})
	return out
}
