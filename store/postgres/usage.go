package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/svcgw/svcgw/store"
)

// Spend and upkeep on PostgreSQL. The roll-ups are complete from the
// start (there is no database from before them to backfill), so reports
// read only them (rollupsComplete is set at open).

// Spend returns what the account and the key have been charged, as of
// now's UTC day and month, as committed by every instance (a read of the
// database; call Sync first to count this instance's queued charges). It
// is for reports: with several instances, admission does not read spend
// but holds leases (see Lease).
func (p *Store) Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (store.Spend, error) {
	return p.PeriodSpend(ctx, accountID, keyID, now)
}

// PeriodSpend reads from the database what the account and the key (none
// when keyID is "") have been charged in now's UTC day and month, as
// committed; Total is the account's total_used.
func (p *Store) PeriodSpend(ctx context.Context, accountID int64, keyID string, now time.Time) (store.Spend, error) {
	ctx, cancel := p.ReadCtx(ctx)
	defer cancel()
	var sp store.Spend
	from := store.DayNumber(store.StartOfMonth(now))
	pd := store.PeriodOf(now)
	err := p.r.QueryRow(ctx, `SELECT
		(SELECT total_used_micros FROM accounts WHERE id = $1),
		COALESCE(SUM(cost_micros) FILTER (WHERE day = $3), 0),
		COALESCE(SUM(cost_micros) FILTER (WHERE day >= $2 AND day < $4), 0),
		COALESCE(SUM(cost_micros) FILTER (WHERE key_id = $5 AND day = $3), 0),
		COALESCE(SUM(cost_micros) FILTER (WHERE key_id = $5 AND day >= $2 AND day < $4), 0)
		FROM spend_daily WHERE account_id = $1 AND day >= $2`,
		accountID, from, pd.Day, pd.MonthEnd, keyID).
		Scan(&nullableInt{&sp.Total}, &sp.AccountDay, &sp.AccountMonth, &sp.KeyDay, &sp.KeyMonth)
	if err != nil {
		return store.Spend{}, fmt.Errorf("spend: %w", p.ReadErr(ctx, err))
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
func (p *Store) StartUpkeep(opts store.UpkeepOptions) error {
	opts = opts.WithDefaults()
	log := opts.Logger
	if log == nil {
		log = p.Logger()
	}
	busy := p.LedgerBusy
	pp := &store.Pacer{Target: opts.ChunkTime, Size: 2000, LedgerBusy: busy}
	return p.upkeep.Start(func(ctx context.Context) { store.RunRetention(ctx, p, p.Now, opts, pp, log) })
}

func (p *Store) stopUpkeep() { p.upkeep.Stop() }
