package store

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
)

// backfill is the progress of the roll-up backfill (ledger_upkeep): the
// generations with after < rowid <= through are not rolled up yet.
type backfill struct {
	after, through int64
}

func (b backfill) complete() bool { return b.after >= b.through }

// readBackfill reads the backfill's progress.
func readBackfill(ctx context.Context, q querier) (backfill, error) {
	var b backfill
	err := q.QueryRowContext(ctx, `SELECT backfill_after, backfill_through FROM ledger_upkeep WHERE id = 1`).
		Scan(&b.after, &b.through)
	if err != nil {
		return backfill{}, fmt.Errorf("read backfill progress: %w", err)
	}
	return b, nil
}

// backfillChunk rolls up the next generations recorded before the roll-ups
// existed, at most limit rowids of them, in one transaction that also
// records the progress, so an interrupted backfill resumes where it
// stopped and never counts a generation twice. It reports how many
// generations it rolled up and how many remain (by rowid, an upper bound).
//
// Generations written since migration 0003 all have rowids above
// backfill_through (rowids only grow while the backfill runs: nothing
// deletes generations until it is complete, see Upkeep), and the ledger
// rolls them up itself.
func (s *Store) backfillChunk(ctx context.Context, limit int64, rs *rollupSums) (n int, left int64, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("backfill: begin: %w", err)
	}
	defer tx.Rollback()
	b, err := readBackfill(ctx, tx)
	if err != nil {
		return 0, 0, fmt.Errorf("backfill: %w", err)
	}
	if b.complete() {
		return 0, 0, nil
	}
	hi := min(b.after+limit, b.through)
	rows, err := tx.QueryContext(ctx,
		`SELECT account_id, COALESCE(key_id, ''), application, request_type,
		        prompt_tokens, completion_tokens, cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
		        cost_micros, created_at
		 FROM generations WHERE rowid > ? AND rowid <= ?`, b.after, hi)
	if err != nil {
		return 0, 0, fmt.Errorf("backfill: read generations: %w", err)
	}
	rs.reset()
	// The upkeep gives up the processor every few hundred rows and between
	// statements: on a gateway with one core its transactions would
	// otherwise hold up calls for their whole length.
	for rows.Next() {
		if n%yieldRows == yieldRows-1 {
			runtime.Gosched()
		}
		var r genRow
		g := &r.g
		if err := rows.Scan(&g.AccountID, &g.KeyID, &g.Application, &g.RequestType,
			&g.PromptTokens, &g.CompletionTokens, &g.CachedPromptTokens, &g.CacheCreationTokens, &g.ReasoningTokens,
			&r.costMicros, &r.createdMS); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("backfill: scan: %w", err)
		}
		g.CreatedAt = fromMS(r.createdMS)
		rs.add(&r)
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("backfill: read generations: %w", err)
	}
	rs.derivePeriods()
	if err := rs.write(ctx, func(ctx context.Context, q string, args []any) error {
		runtime.Gosched()
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}); err != nil {
		return 0, 0, fmt.Errorf("backfill: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger_upkeep SET backfill_after = ? WHERE id = 1`, hi); err != nil {
		return 0, 0, fmt.Errorf("backfill: record progress: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("backfill: commit: %w", err)
	}
	return n, b.through - hi, nil
}

// loadBackfillState notes at Open whether the roll-ups are complete, so
// that Usage need not ask again.
func (s *Store) loadBackfillState(ctx context.Context, db *sql.DB) error {
	b, err := readBackfill(ctx, db)
	if err != nil {
		return err
	}
	s.rollupsComplete.Store(b.complete())
	return nil
}
