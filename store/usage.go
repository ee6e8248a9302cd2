package store

import (
	"context"
	"fmt"
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

// groupExprs maps each grouping to the SQL expression of its bucket. Only
// these fixed strings ever reach the query text.
var groupExprs = map[string]string{
	GroupByDay:         `strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')`,
	GroupByRequestType: `request_type`,
	GroupByApplication: `application`,
	GroupByAPIKey:      `COALESCE(key_id, '')`,
}

// UsageQuery selects and groups an account's generations.
type UsageQuery struct {
	// GroupBy is one of GroupByDay, GroupByRequestType, GroupByApplication,
	// GroupByAPIKey; anything else is ErrInvalid.
	GroupBy string
	// Start (inclusive) and End (exclusive) bound the generations' creation
	// times; a zero time is unbounded.
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
	Cost              apd.Decimal
}

// Usage returns the account's usage in q's window, one bucket per group,
// ordered by bucket. Sums are over INTEGER columns, so they are exact. It
// reads what is committed: call Sync first to see generations recorded just
// before.
func (s *Store) Usage(ctx context.Context, accountID int64, q UsageQuery) ([]Bucket, error) {
	expr, ok := groupExprs[q.GroupBy]
	if !ok {
		return nil, fmt.Errorf("usage: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	if !q.Start.IsZero() && !q.End.IsZero() && q.Start.After(q.End) {
		return nil, fmt.Errorf("usage: start after end: %w", ErrInvalid)
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
		`SELECT `+expr+` AS bucket, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),
		        SUM(cached_prompt_tokens), SUM(cost_micros)
		 FROM generations WHERE `+where+`
		 GROUP BY bucket ORDER BY bucket`,
		args...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	buckets := []Bucket{}
	for rows.Next() {
		var (
			b    Bucket
			cost int64
		)
		if err := rows.Scan(&b.Bucket, &b.Requests, &b.InputTokens, &b.OutputTokens, &b.CachedInputTokens, &cost); err != nil {
			return nil, fmt.Errorf("usage: scan: %w", err)
		}
		b.TotalTokens = b.InputTokens + b.OutputTokens
		b.Cost = fromMicros(cost)
		buckets = append(buckets, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return buckets, nil
}
