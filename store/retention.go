package store

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// Generation retention (docs/ledger-scale.md). Generation rows older than the
// retention window are deleted in small transactions by the upkeep
// goroutine; the usage roll-ups, credits, balances and spend are kept
// forever, so no figure a caller sees changes when detail is pruned. A
// generation's feedback and kept output items (items.go) are deleted with
// it: a rating is detail about one call, an item is the call's output, and
// keeping either would keep what the operator asked to be deleted.

// PrunedBefore returns the time before which generation detail has been
// deleted by retention (or is being deleted by the pass under way); zero
// when retention has never run. A generation created before it cannot be
// looked up any more, though it still counts in usage and balances.
func (s *Policy) PrunedBefore(ctx context.Context) (time.Time, error) {
	var before int64
	if err := s.db.Readers().QueryRow(ctx, `SELECT pruned_before FROM ledger_upkeep WHERE id = 1`).Scan(&before); err != nil {
		return time.Time{}, fmt.Errorf("pruned before: %w", err)
	}
	if before == 0 {
		return time.Time{}, nil
	}
	return FromMillis(before), nil
}

// startPrune records that detail before cutoff (Unix ms) is being deleted.
// The mark only moves forward, and is set before the rows go, so that a
// lookup of a row deleted by this pass is told why it is gone.
func (s *Policy) startPrune(ctx context.Context, cutoff int64) error {
	return s.db.WriteTx(ctx, "retention: record cutoff", func(tx Conn) error {
		if _, err := tx.Exec(ctx,
			`UPDATE ledger_upkeep SET pruned_before = ? WHERE id = 1 AND pruned_before < ?`, cutoff, cutoff); err != nil {
			return fmt.Errorf("retention: record cutoff: %w", err)
		}
		return nil
	})
}

// pruneAccounts lists the accounts, for a retention pass.
func (s *Policy) pruneAccounts(ctx context.Context) ([]int64, error) {
	rows, err := s.db.Readers().Query(ctx, `SELECT id FROM accounts ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("retention: list accounts: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("retention: list accounts: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retention: list accounts: %w", err)
	}
	return ids, nil
}

// pruneChunk deletes, in one transaction, up to limit of the account's
// oldest generations created before cutoff (Unix ms), with their feedback.
// It reports how many it deleted: fewer than limit means none are left.
// The rows go in statements of at most pruneStatement, between which it
// gives up the processor (see backfillChunk): on SQLite the transaction
// holds the database's write lock and the writer connection throughout.
func (s *Policy) pruneChunk(ctx context.Context, accountID, cutoff int64, limit int) (int, error) {
	// Both statements select the same rows: the first entries of the
	// (account_id, created_at) index below the cutoff.
	const oldest = `SELECT id FROM generations WHERE account_id = ? AND created_at < ? ORDER BY created_at LIMIT ?`
	total := 0
	err := s.db.WriteTx(ctx, "retention", func(tx Conn) error {
		for total < limit {
			runtime.Gosched()
			n := min(pruneStatement, limit-total)
			if _, err := tx.Exec(ctx,
				`DELETE FROM feedback WHERE account_id = ? AND generation_id IN (`+oldest+`)`,
				accountID, accountID, cutoff, n); err != nil {
				return fmt.Errorf("retention: delete feedback: %w", err)
			}
			if _, err := tx.Exec(ctx,
				`DELETE FROM output_items WHERE generation_id IN (`+oldest+`)`, accountID, cutoff, n); err != nil {
				return fmt.Errorf("retention: delete output items: %w", err)
			}
			deleted, err := tx.Exec(ctx, `DELETE FROM generations WHERE id IN (`+oldest+`)`, accountID, cutoff, n)
			if err != nil {
				return fmt.Errorf("retention: delete generations: %w", err)
			}
			total += int(deleted)
			if int(deleted) < n {
				break
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// pruneStatement is the most generations one DELETE of retention takes.
const pruneStatement = 256
