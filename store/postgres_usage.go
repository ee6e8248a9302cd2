package store

import (
	"context"
	"fmt"
	"time"
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
