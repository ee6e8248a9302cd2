package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Usage, spend, retention and upkeep on PostgreSQL. The roll-ups are
// complete from the start (there is no database from before them to
// backfill), so reports read only them.

// Usage returns the account's usage in q's window (see Store.Usage).
func (p *Postgres) Usage(ctx context.Context, accountID int64, q UsageQuery) ([]Bucket, error) {
	if _, ok := scanExprs[q.GroupBy]; !ok {
		return nil, fmt.Errorf("usage: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	_, from, to, err := dayRange(q)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	query, args := usageRollupsSQL(accountID, q.GroupBy, from, to)
	if query == "" {
		return bucketsOf(nil), nil
	}
	rows, err := p.r.Query(ctx, pgq(query), args...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	sums, err := sumUsageRows(rows, q.GroupBy)
	if err != nil {
		return nil, err
	}
	return bucketsOf(sums), nil
}

// UsageByDay returns the account's usage in q's window by UTC day and
// q.GroupBy (see Store.UsageByDay).
func (p *Postgres) UsageByDay(ctx context.Context, accountID int64, q UsageQuery) ([]DayBucket, error) {
	if _, ok := scanExprs[q.GroupBy]; !ok || q.GroupBy == GroupByDay {
		return nil, fmt.Errorf("usage by day: group by %q: %w", q.GroupBy, ErrInvalid)
	}
	_, from, to, err := dayRange(q)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	if from >= to {
		return dayBucketsOf(nil), nil
	}
	rows, err := p.r.Query(ctx, pgq(usageDaySQL), accountID, q.GroupBy, spanDay, from, to)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	defer rows.Close()
	sums, err := sumDayRows(rows)
	if err != nil {
		return nil, err
	}
	return dayBucketsOf(sums), nil
}

// Spend returns what the account and the key have been charged, as of
// now's UTC day and month, as committed by every instance (a read of the
// database; call Sync first to count this instance's queued charges). It
// is for reports: with several instances, admission does not read spend
// but holds leases (see Lease).
func (p *Postgres) Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (Spend, error) {
	return p.PeriodSpend(ctx, accountID, keyID, now)
}

// PeriodSpend reads from the database what the account and the key (none
// when keyID is "") have been charged in now's UTC day and month, as
// committed; Total is the account's total_used.
func (p *Postgres) PeriodSpend(ctx context.Context, accountID int64, keyID string, now time.Time) (Spend, error) {
	ctx, cancel := p.readCtx(ctx)
	defer cancel()
	var sp Spend
	from := dayNumber(startOfMonth(now))
	pd := periodOf(now)
	err := p.r.QueryRow(ctx, `SELECT
		(SELECT total_used_micros FROM accounts WHERE id = $1),
		COALESCE(SUM(cost_micros) FILTER (WHERE day = $3), 0),
		COALESCE(SUM(cost_micros) FILTER (WHERE day >= $2 AND day < $4), 0),
		COALESCE(SUM(cost_micros) FILTER (WHERE key_id = $5 AND day = $3), 0),
		COALESCE(SUM(cost_micros) FILTER (WHERE key_id = $5 AND day >= $2 AND day < $4), 0)
		FROM spend_daily WHERE account_id = $1 AND day >= $2`,
		accountID, from, pd.day, pd.monthEnd, keyID).
		Scan(&nullableInt{&sp.Total}, &sp.AccountDay, &sp.AccountMonth, &sp.KeyDay, &sp.KeyMonth)
	if err != nil {
		return Spend{}, fmt.Errorf("spend: %w", p.readErr(ctx, err))
	}
	if keyID == "" {
		sp.KeyDay, sp.KeyMonth = 0, 0
	}
	return sp, nil
}

// nullableInt scans a BIGINT that may be NULL (an unknown account) as 0.
type nullableInt struct{ v *int64 }

func (n *nullableInt) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.v = 0
	case int64:
		*n.v = v
	default:
		return fmt.Errorf("scan %T into an integer", src)
	}
	return nil
}

// PrunedBefore returns the time before which generation detail has been
// deleted by retention; zero when it has never run.
func (p *Postgres) PrunedBefore(ctx context.Context) (time.Time, error) {
	var before int64
	if err := p.r.QueryRow(ctx, `SELECT pruned_before FROM ledger_upkeep WHERE id = 1`).Scan(&before); err != nil {
		return time.Time{}, fmt.Errorf("pruned before: %w", err)
	}
	if before == 0 {
		return time.Time{}, nil
	}
	return fromMS(before), nil
}

// StartUpkeep starts retention (see Store.StartUpkeep; there is no
// backfill on PostgreSQL). Every instance may run it: passes at once
// delete the same rows, one after the other.
func (p *Postgres) StartUpkeep(opts UpkeepOptions) error {
	opts = opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = p.log
	}
	busy := func() bool { return p.pending.Load() >= int64(max(p.batchSize/2, 1)) }
	pp := &pacer{target: opts.ChunkTime, size: 2000, ledgerBusy: busy}
	return p.upkeep.start(func(ctx context.Context) { runRetention(ctx, p, p.now, opts, pp, log) })
}

func (p *Postgres) stopUpkeep() { p.upkeep.stop() }

func (p *Postgres) startPrune(ctx context.Context, cutoff int64) error {
	if _, err := p.w.Exec(ctx,
		`UPDATE ledger_upkeep SET pruned_before = $1 WHERE id = 1 AND pruned_before < $1`, cutoff); err != nil {
		return fmt.Errorf("retention: record cutoff: %w", err)
	}
	return nil
}

func (p *Postgres) pruneAccounts(ctx context.Context) ([]int64, error) {
	rows, err := p.r.Query(ctx, `SELECT id FROM accounts ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("retention: list accounts: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("retention: list accounts: %w", err)
	}
	return ids, nil
}

func (p *Postgres) pruneChunk(ctx context.Context, accountID, cutoff int64, limit int) (int, error) {
	const oldest = `SELECT id FROM generations WHERE account_id = $1 AND created_at < $2 ORDER BY created_at LIMIT $3`
	var deleted int64
	err := pgx.BeginFunc(ctx, p.w, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM feedback WHERE account_id = $1 AND generation_id IN (`+oldest+`)`,
			accountID, cutoff, limit); err != nil {
			return fmt.Errorf("retention: delete feedback: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM output_items WHERE generation_id IN (`+oldest+`)`,
			accountID, cutoff, limit); err != nil {
			return fmt.Errorf("retention: delete output items: %w", err)
		}
		tag, err := tx.Exec(ctx, `DELETE FROM generations WHERE id IN (`+oldest+`)`, accountID, cutoff, limit)
		if err != nil {
			return fmt.Errorf("retention: delete generations: %w", err)
		}
		deleted = tag.RowsAffected()
		return nil
	})
	return int(deleted), err
}
