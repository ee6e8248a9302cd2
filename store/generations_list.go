package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// ListGenerations returns a page of the account's generations, newest
// first (by created_at, then by insertion order among equal times), and
// whether older ones follow. Only the account's own rows are read: the scan
// walks an index backwards from the cursor, so a page costs the same at any
// depth of history. Unfiltered, the index is (account_id, created_at);
// filtered, it is the filter's own, (account_id, application or
// request_type, created_at) (migration 0005), so a page of a rare or absent
// value costs what any page does. With both filters the application's
// index is read and the request type tested on its rows: such a page's
// walk is bounded by the application's generations, not the account's
// (see listSQL).
//
// It reads what is committed: call Sync first to see generations recorded
// just before.
func (s *Store) ListGenerations(ctx context.Context, accountID int64, q ListQuery) ([]ListedGeneration, bool, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, false, fmt.Errorf("list generations: limit %d: %w", q.Limit, ErrInvalid)
	}
	// One read transaction, so the cursor and the page come from one
	// snapshot.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, false, fmt.Errorf("list generations: begin: %w", err)
	}
	defer tx.Rollback()

	args := []any{ReviewEndUser, accountID}
	if q.Before != "" {
		var created, rowid int64
		err := tx.QueryRowContext(ctx,
			`SELECT created_at, rowid FROM generations WHERE id = ? AND account_id = ?`,
			q.Before, accountID).Scan(&created, &rowid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("list generations: cursor %q: %w", q.Before, ErrNotFound)
		}
		if err != nil {
			return nil, false, fmt.Errorf("list generations: cursor: %w", err)
		}
		args = append(args, created, created, rowid)
	}
	if q.RequestType != "" {
		args = append(args, q.RequestType)
	}
	if q.Application != "" {
		args = append(args, q.Application)
	}
	args = append(args, limit+1)
	rows, err := tx.QueryContext(ctx, listSQL(q.Before != "", q.RequestType != "", q.Application != ""), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list generations: %w", err)
	}
	defer rows.Close()
	return scanListed(rows, limit)
}

// scanListed reads a ListGenerations page of at most limit rows from rows
// (the query's limit+1 rows: one more says whether older ones follow).
func scanListed(rows rowScanner, limit int) ([]ListedGeneration, bool, error) {
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
		g.Cost = fromMicros(cost)
		g.CreatedAt = fromMS(created)
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

// listSQL is the text of a ListGenerations page. Its placeholders are, in
// order: the review's end user, the account, then, with a cursor, its
// created_at twice and its rowid, then the request type and the
// application when filtered, and the limit.
//
// With an application, the page is read from its index by name (INDEXED
// BY): without statistics SQLite would take the request type's index when
// both are set, and a request type is one of eight values, often a third of
// the account, where an application label is one of many and is the value
// most likely to be rare or mistyped, so its walk is the shorter one.
func listSQL(cursor, requestType, application bool) string {
	from := `generations g`
	if application {
		from += ` INDEXED BY generations_account_application`
	}
	where := `g.account_id = ?`
	if cursor {
		// The range on created_at is what the index serves; the rowid test
		// only orders the rows sharing the cursor's millisecond.
		where += ` AND g.created_at <= ? AND (g.created_at < ? OR g.rowid < ?)`
	}
	if requestType {
		where += ` AND g.request_type = ?`
	}
	if application {
		where += ` AND g.application = ?`
	}
	return `SELECT g.id, g.account_id, COALESCE(g.key_id, ''), g.application, g.surface, g.model,
	        g.request_type, g.tier, g.streamed, g.finish_reason, g.prompt_tokens, g.completion_tokens,
	        g.cached_prompt_tokens, g.cache_creation_tokens, g.reasoning_tokens,
	        g.cost_micros, g.latency_ms, g.generation_time_ms, g.created_at,
	        (SELECT COUNT(*) FROM feedback f
	          WHERE f.account_id = g.account_id AND f.generation_id = g.id AND f.rating = 'up'),
	        (SELECT COUNT(*) FROM feedback f
	          WHERE f.account_id = g.account_id AND f.generation_id = g.id AND f.rating = 'down'),
	        COALESCE(r.rating, ''), COALESCE(r.comment, '')
	 FROM ` + from + `
	 LEFT JOIN feedback r ON r.account_id = g.account_id AND r.generation_id = g.id AND r.end_user = ?
	 WHERE ` + where + `
	 ORDER BY g.created_at DESC, g.rowid DESC
	 LIMIT ?`
}
