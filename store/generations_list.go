package store

import (
	"fmt"

	"github.com/svcgw/svcgw/money"
)

// Bounds of ListQuery.Limit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ReviewEndUser is the end user under which the dashboard records its
// rating of a generation (its "review"), so that a key holder's own rating
// never replaces one their application collected with no end user.
const ReviewEndUser = "svcgw:dashboard"

// ListQuery selects a page of an account's generations, newest first.
type ListQuery struct {
	// Limit is the most generations returned, 1..MaxListLimit; 0 means
	// DefaultListLimit. Anything else is ErrInvalid.
	Limit int
	// Before, when set, is the id of one of the account's generations: the
	// page starts just after it (older). An id not in the account is
	// ErrNotFound.
	Before string
	// RequestType and Application, when set, keep only the generations
	// with that request type or application label.
	RequestType, Application string
}

// ListedGeneration is a generation as a listing shows it: the record and a
// summary of its feedback.
type ListedGeneration struct {
	Generation
	// Up and Down count the ratings of every end user.
	Up, Down int
	// Review is the rating recorded under ReviewEndUser; Rating is "" when
	// there is none.
	Review struct{ Rating, Comment string }
}

// limit is the page's size: q.Limit, DefaultListLimit when 0; ErrInvalid
// outside [1, MaxListLimit].
func (q ListQuery) PageLimit() (int, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return 0, fmt.Errorf("list generations: limit %d: %w", q.Limit, ErrInvalid)
	}
	return limit, nil
}

// ListColumns are what a page reads of each generation g (ScanListed):
// its columns, its ratings up and down, and the review r's rating and
// comment.
const ListColumns = `g.id, g.account_id, COALESCE(g.key_id, ''), g.application, g.surface, g.model,
	        g.request_type, g.tier, g.streamed, g.finish_reason, g.prompt_tokens, g.completion_tokens,
	        g.cached_prompt_tokens, g.cache_creation_tokens, g.reasoning_tokens,
	        g.cost_micros, g.latency_ms, g.generation_time_ms, g.created_at,
	        (SELECT COUNT(*) FROM feedback f
	          WHERE f.account_id = g.account_id AND f.generation_id = g.id AND f.rating = 'up'),
	        (SELECT COUNT(*) FROM feedback f
	          WHERE f.account_id = g.account_id AND f.generation_id = g.id AND f.rating = 'down'),
	        COALESCE(r.rating, ''), COALESCE(r.comment, '')`

// ScanListed reads a ListGenerations page of at most limit rows from rows
// (the query's limit+1 rows: one more says whether older ones follow).
func ScanListed(rows rowScanner, limit int) ([]ListedGeneration, bool, error) {
	out := make([]ListedGeneration, 0, limit)
	for rows.Next() {
		var (
			l             ListedGeneration
			g             = &l.Generation
			cost, created int64
		)
		if err := rows.Scan(
			&g.ID, &g.AccountID, &g.KeyID, &g.Application, &g.Surface, &g.Model,
			&g.RequestType, &g.Tier, &g.Streamed, &g.FinishReason, &g.PromptTokens, &g.CompletionTokens,
			&g.CachedPromptTokens, &g.CacheCreationTokens, &g.ReasoningTokens,
			&cost, &g.LatencyMS, &g.GenerationTimeMS, &created,
			&l.Up, &l.Down, &l.Review.Rating, &l.Review.Comment); err != nil {
			return nil, false, fmt.Errorf("list generations: scan: %w", err)
		}
		g.Cost = money.Micros(cost)
		g.CreatedAt = FromMillis(created)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list generations: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}
