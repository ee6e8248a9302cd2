package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"time"

	"github.com/svcgw/svcgw/store"
)

// backfill is the progress of the roll-up backfill (ledger_upkeep): the
// generations with after < rowid <= through are not rolled up yet.
type backfill struct {
	after, through int64
}

func (b backfill) complete() bool { return b.after >= b.through }

// querier is what *sql.DB and *sql.Tx have in common for reads.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

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

// backfillReadStep is how many rowids one read of the backfill covers.
const backfillReadStep = 2048

// backfillChunk rolls up the next generations recorded before the roll-ups
// existed: at most limit rowids of them, and fewer once their sums fill
// maxRows rows of usage_daily. It reports how many generations it rolled up
// and how many remain (by rowid, an upper bound).
//
// It reads the generations first, outside any write transaction, in steps
// of backfillReadStep rowids (calling rest, when not nil, with each step's
// duration), and adds them up in memory; then it writes the sums and the
// progress in one short transaction. So the ledger waits only for the
// writing, and the more generations a chunk sums, the fewer rows it writes
// per generation (each roll-up row once per chunk). The transaction
// re-reads the progress and writes nothing if it has moved (another
// process backfilling), so a generation is never counted twice, and an
// interrupted backfill resumes where it stopped.
//
// Reading outside the transaction is safe because the rows read are never
// written again: generations written since migration 0003 all have rowids
// above backfill_through (rowids only grow while the backfill runs: nothing
// deletes generations until it is complete, see StartUpkeep), and the
// ledger rolls those up itself.
func (s *Store) backfillChunk(ctx context.Context, limit int64, maxRows int, rs *store.RollupSums, rest func(time.Duration) bool) (c chunk, err error) {
	b, err := readBackfill(ctx, s.r)
	if err != nil {
		return chunk{}, fmt.Errorf("backfill: %w", err)
	}
	if b.complete() {
		return chunk{}, nil
	}
	rs.Reset()
	end := min(b.after+limit, b.through)
	hi := b.after
	for hi < end && len(rs.Daily) < maxRows {
		began := time.Now()
		next := min(hi+backfillReadStep, end)
		read, err := s.backfillRead(ctx, hi, next, rs)
		if err != nil {
			return chunk{}, err
		}
		c.rolled += read
		hi = next
		if rest != nil && hi < end && !rest(time.Since(began)) {
			return chunk{}, ctx.Err()
		}
	}
	rs.DerivePeriods()

	began := time.Now()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return chunk{}, fmt.Errorf("backfill: begin: %w", err)
	}
	defer tx.Rollback()
	now, err := readBackfill(ctx, tx)
	if err != nil {
		return chunk{}, fmt.Errorf("backfill: %w", err)
	}
	if now.after != b.after {
		// Moved meanwhile: start again from there.
		return chunk{left: now.through - now.after}, nil
	}
	// The writing gives up the processor between statements: on a gateway
	// with one core it would otherwise hold up calls for its whole length.
	// Each statement is parsed once per chunk (a 64-row upsert takes long
	// to parse), in the transaction, so it is closed with it.
	stmts := make(map[string]*sql.Stmt)
	var w rollupWriter
	if err := w.write(ctx, rs, func(ctx context.Context, q string, args []any) error {
		runtime.Gosched()
		st := stmts[q]
		if st == nil {
			var err error
			if st, err = tx.PrepareContext(ctx, q); err != nil {
				return err
			}
			stmts[q] = st
		}
		_, err := st.ExecContext(ctx, args...)
		return err
	}); err != nil {
		return chunk{}, fmt.Errorf("backfill: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger_upkeep SET backfill_after = ? WHERE id = 1`, hi); err != nil {
		return chunk{}, fmt.Errorf("backfill: record progress: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return chunk{}, fmt.Errorf("backfill: commit: %w", err)
	}
	c.left, c.rows, c.wrote = b.through-hi, len(rs.Daily), time.Since(began)
	return c, nil
}

// chunk is what one backfillChunk did.
type chunk struct {
	rolled int           // generations rolled up
	left   int64         // rowids left to do, an upper bound
	rows   int           // usage_daily rows their sums filled
	wrote  time.Duration // how long the write transaction took
}

// backfillRead adds the generations with after < rowid <= upto to rs, in
// one short read, giving up the processor between rows (store.Slicer).
func (s *Store) backfillRead(ctx context.Context, after, upto int64, rs *store.RollupSums) (int, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT account_id, COALESCE(key_id, ''), application, request_type,
		        prompt_tokens, completion_tokens, cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
		        cost_micros, created_at
		 FROM generations WHERE rowid > ? AND rowid <= ?`, after, upto)
	if err != nil {
		return 0, fmt.Errorf("backfill: read generations: %w", err)
	}
	defer rows.Close()
	n := 0
	var slice store.Slicer
	for rows.Next() {
		slice.Yield()
		var r store.GenRow
		g := &r.Gen
		if err := rows.Scan(&g.AccountID, &g.KeyID, &g.Application, &g.RequestType,
			&g.PromptTokens, &g.CompletionTokens, &g.CachedPromptTokens, &g.CacheCreationTokens, &g.ReasoningTokens,
			&r.CostMicros, &r.CreatedMS); err != nil {
			return 0, fmt.Errorf("backfill: scan: %w", err)
		}
		g.CreatedAt = store.FromMillis(r.CreatedMS)
		rs.Add(&r)
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("backfill: read generations: %w", err)
	}
	return n, nil
}

// loadBackfillState notes at Open whether the roll-ups are complete, so
// that Usage need not ask again.
func (s *Store) loadBackfillState(ctx context.Context, db *sql.DB) error {
	b, err := readBackfill(ctx, db)
	if err != nil {
		return err
	}
	s.SetRollupsComplete(b.complete())
	return nil
}
