package store

import (
	"context"
	"fmt"
)

// dayAxisExprs maps each grouping UsageByDay takes to the SQL expression of
// its bucket. Only these fixed strings ever reach the query text.
var dayAxisExprs = map[string]string{
	GroupByRequestType: `request_type`,
	GroupByApplication: `application`,
	GroupByAPIKey:      `COALESCE(key_id, '')`,
}

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
// stacked by one axis, needs. Sums are exact. It reads what is committed:
// call Sync first to see generations recorded just before.
func (s *Store) UsageByDay(ctx context.Context, accountID int64, q UsageQuery) ([]DayBucket, error) {
	expr, ok := dayAxisExprs[q.GroupBy]
	if !ok {
		return nil, fmt.Errorf("usage by day: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	if !q.Start.IsZero() && !q.End.IsZero() && q.Start.After(q.End) {
		return nil, fmt.Errorf("usage by day: start after end: %w", ErrInvalid)
	}
	where, args := `account_id = ?`, []any{accountID}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, ceilMS(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, ceilMS(q.End))
	}
	rows, err := s.r.QueryContext(ctx,
		`SELECT strftime('%Y-%m-%d', created_at / 1000, 'unixepoch') AS day, `+expr+` AS bucket,
		        COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_prompt_tokens), SUM(cost_micros)
		 FROM generations WHERE `+where+`
		 GROUP BY day, bucket ORDER BY day, bucket`,
		args...)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	defer rows.Close()
	out := []DayBucket{}
	for rows.Next() {
		var (
			b    DayBucket
			cost int64
		)
		if err := rows.Scan(&b.Day, &b.Bucket.Bucket, &b.Requests, &b.InputTokens, &b.OutputTokens, &b.CachedInputTokens, &cost); err != nil {
			return nil, fmt.Errorf("usage by day: scan: %w", err)
		}
		b.TotalTokens = b.InputTokens + b.OutputTokens
		b.Cost = fromMicros(cost)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	return out, nil
}
