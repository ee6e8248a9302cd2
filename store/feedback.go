package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Feedback is a rating of one generation by one end user.
type Feedback struct {
	// ID is the generation id.
	ID string
	// EndUser is the caller's opaque end-user string; "" is a valid end
	// user of its own. A rating is unique per (account, ID, EndUser).
	EndUser string
	Rating  string // "up" or "down"
	Comment string
	// Labels is a flat JSON object, or nil. The caller validates its shape;
	// the store only checks that it is JSON.
	Labels json.RawMessage
}

// MaxFeedbackEndUsers is how many end users may rate one generation: the
// rows one response can add are bounded, however many end_user strings a
// caller makes up. Replacing an existing end user's rating always works.
const MaxFeedbackEndUsers = 100

// UpsertFeedback records f against the account's generation f.ID, or
// replaces the rating already recorded for (f.ID, f.EndUser); created
// reports which. An unknown id, or another account's, is ErrNotFound; a
// generation created more than maxAge before now is ErrConflict (maxAge <= 0
// means no limit); a new end user on a generation already rated by
// MaxFeedbackEndUsers is ErrLimit; a rating other than up or down, or
// labels that are not JSON, are ErrInvalid. Feedback never changes usage or
// balances.
//
// It reads what is committed: call Sync first if the generation may have
// been recorded just before. Waiting for the database is bounded by
// QueryTimeout (ErrUnavailable past it).
func (s *Policy) UpsertFeedback(ctx context.Context, accountID int64, f Feedback, maxAge time.Duration) (created bool, err error) {
	if f.Rating != "up" && f.Rating != "down" {
		return false, fmt.Errorf("feedback rating %q: %w", f.Rating, ErrInvalid)
	}
	var labels sql.NullString
	if f.Labels != nil {
		if !json.Valid(f.Labels) {
			return false, fmt.Errorf("feedback labels: %w: not JSON", ErrInvalid)
		}
		labels = sql.NullString{String: string(f.Labels), Valid: true}
	}

	// Bounded like a read: it waits for the writer's connections and
	// locks, which a failing ledger or another process may hold.
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	now := s.now()
	err = s.db.WriteTx(ctx, "feedback", func(tx Conn) error {
		// The generation's row is locked (on an engine whose write
		// transactions do not hold the whole database), so that two end
		// users rating it at once are counted one after the other.
		var genCreated int64
		err := tx.QueryRow(ctx,
			`SELECT created_at FROM generations WHERE id = ? AND account_id = ?`+s.db.Dialect().ForUpdate,
			f.ID, accountID).Scan(&genCreated)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("feedback: generation %q: %w", f.ID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("feedback: generation: %w", err)
		}
		if maxAge > 0 && now.Sub(FromMillis(genCreated)) > maxAge {
			return fmt.Errorf("feedback: generation %q is older than %s: %w", f.ID, maxAge, ErrConflict)
		}
		var existing, raters int
		if err := tx.QueryRow(ctx,
			`SELECT COUNT(*) FILTER (WHERE end_user = ?), COUNT(*) FROM feedback WHERE account_id = ? AND generation_id = ?`,
			f.EndUser, accountID, f.ID).Scan(&existing, &raters); err != nil {
			return fmt.Errorf("feedback: lookup: %w", err)
		}
		if existing == 0 && raters >= MaxFeedbackEndUsers {
			return fmt.Errorf("feedback: generation %q has %d end users' ratings: %w", f.ID, raters, ErrLimit)
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO feedback (account_id, generation_id, end_user, rating, comment, labels, created_at, updated_at)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (account_id, generation_id, end_user) DO UPDATE SET
			   rating = excluded.rating, comment = excluded.comment,
			   labels = excluded.labels, updated_at = excluded.updated_at`,
			accountID, f.ID, f.EndUser, f.Rating, f.Comment, labels, Millis(now), Millis(now)); err != nil {
			return fmt.Errorf("feedback: upsert: %w", err)
		}
		created = existing == 0
		return nil
	})
	if err != nil {
		return false, s.db.ReadErr(ctx, err)
	}
	return created, nil
}
