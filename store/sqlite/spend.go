package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/svcgw/svcgw/store"
)

// Spend returns what the account and the key (none when keyID is "") have
// been charged, as of now's UTC day and month. It reads memory, not the
// database: the first call for an account or key since Open loads its
// committed spend (the account's total_used and its spend_daily rows), and
// from then on RecordGeneration adds each charge as it is queued and the
// ledger writer takes back each one it drops. So Spend is exact at every
// instant, queued charges included, with no read per call.
//
// This holds because the Store is the only writer of charges: one process
// serving a database file. An account or key is loaded before any charge of
// it is queued (RecordGeneration loads it first), so the load sees every
// earlier charge committed and none in flight.
func (s *Store) Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (store.Spend, error) {
	var sp store.Spend
	a, err := s.spend.entry(ctx, s, spendKey{account: accountID}, now)
	if err != nil {
		return store.Spend{}, err
	}
	p := store.PeriodOf(now)
	a.mu.Lock()
	sp.Total = a.total
	sp.AccountDay, sp.AccountMonth = a.period(p)
	a.mu.Unlock()
	if keyID == "" {
		return sp, nil
	}
	k, err := s.spend.entry(ctx, s, spendKey{account: accountID, key: keyID}, now)
	if err != nil {
		return store.Spend{}, err
	}
	k.mu.Lock()
	sp.KeyDay, sp.KeyMonth = k.period(p)
	k.mu.Unlock()
	return sp, nil
}

// PeriodSpend reads from the database what the account and the key (none
// when keyID is "") have been charged in now's UTC day and month, as
// committed; Total is the account's total_used. It is for operators (the
// CLI and the management API); the server asks Spend, which also counts
// what is queued. It reads through the pool of the account endpoints and
// commands, never the call path's: a page of accounts is one read per
// account, and calls must not queue behind them for a connection.
//
// An account's alone (keyID "", the management API's list of accounts)
// is read from the usage roll-ups once they are complete: today's row and
// this month's rows by request type, at most nine rows whatever the
// number of keys, where spend_daily holds a row per key and day (and
// loadSpend reads the month before too, for the caps' memory).
func (s *Store) PeriodSpend(ctx context.Context, accountID int64, keyID string, now time.Time) (store.Spend, error) {
	if keyID == "" && s.RollupsComplete() {
		return s.accountPeriodSpend(ctx, accountID, now)
	}
	var sp store.Spend
	e, err := s.loadSpend(ctx, s.r, spendKey{account: accountID}, now)
	if err != nil {
		return store.Spend{}, err
	}
	p := store.PeriodOf(now)
	sp.Total = e.total
	sp.AccountDay, sp.AccountMonth = e.period(p)
	if keyID != "" {
		if e, err = s.loadSpend(ctx, s.r, spendKey{account: accountID, key: keyID}, now); err != nil {
			return store.Spend{}, err
		}
		sp.KeyDay, sp.KeyMonth = e.period(p)
	}
	return sp, nil
}

// accountPeriodSpendSQL reads an account's total_used and its charges of
// a day and of a month from usage_periods: the one row of the day axis on
// the day, and the rows of the request type axis for the month (the
// axes' sums are the same generations'; store/storetest's CheckRollups
// holds them to spend_daily's).
const accountPeriodSpendSQL = `SELECT
	(SELECT total_used_micros FROM accounts WHERE id = ?1),
	(SELECT COALESCE(SUM(cost_micros), 0) FROM usage_periods
		WHERE account_id = ?1 AND axis = 'day' AND span = 'day' AND first_day = ?2),
	(SELECT COALESCE(SUM(cost_micros), 0) FROM usage_periods
		WHERE account_id = ?1 AND axis = 'request_type' AND span = 'month' AND first_day = ?3)`

// accountPeriodSpend is PeriodSpend of an account alone, from the roll-ups.
func (s *Store) accountPeriodSpend(ctx context.Context, accountID int64, now time.Time) (store.Spend, error) {
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	p := store.PeriodOf(now)
	var (
		sp    store.Spend
		total sql.NullInt64 // NULL: an unknown account, which has spent nothing
	)
	err := s.r.QueryRowContext(ctx, accountPeriodSpendSQL, accountID, p.Day, p.MonthStart).Scan(&total, &sp.AccountDay, &sp.AccountMonth)
	if err != nil {
		return store.Spend{}, fmt.Errorf("spend of account %d: %w", accountID, readErr(ctx, err))
	}
	sp.Total = total.Int64
	return sp, nil
}

// sqliteCharges is the spend tracker as the ledger's charge counter.
type sqliteCharges struct{ s *Store }

func (c sqliteCharges) Record(r store.GenRow) store.GenRow {
	c.s.spend.record(c.s, r.Gen.AccountID, r.Gen.KeyID, r.CostMicros, r.Gen.CreatedAt)
	return r
}

func (c sqliteCharges) Unrecord(r store.GenRow) {
	c.s.spend.unrecord(r.Gen.AccountID, r.Gen.KeyID, r.CostMicros, r.Gen.CreatedAt)
}

// spendKey names an entry of the spend tracker: an account's (key "") or a
// key's.
type spendKey struct {
	account int64
	key     string
}

// spendTracker is the in-memory spend of every account and key that has
// been asked about or charged since Open. Entries are never evicted: there
// is one per account and per key in use, each a few hundred bytes, bounded
// by the api_keys table.
type spendTracker struct {
	mu      sync.Mutex
	entries map[spendKey]*spendEntry
}

// spendEntry is the spend of one account or key.
type spendEntry struct {
	mu     sync.Mutex
	loaded bool
	total  int64 // account entries only: every charge ever
	// days holds the charge of each UTC day (by DayNumber) from the start of
	// the month before the one the entry was loaded in; older days are
	// pruned as time goes on, so it stays under about 65 entries.
	days map[int32]int64
}

// entry returns the loaded entry of k, loading it from the database first
// if needed (under the entry's lock, so charges wait for the load).
func (t *spendTracker) entry(ctx context.Context, s *Store, k spendKey, now time.Time) (*spendEntry, error) {
	t.mu.Lock()
	e, ok := t.entries[k]
	if !ok {
		if t.entries == nil {
			t.entries = make(map[spendKey]*spendEntry)
		}
		e = &spendEntry{}
		t.entries[k] = e
	}
	t.mu.Unlock()
	if ok {
		// The common case: skip the lock dance below for loaded entries.
		e.mu.Lock()
		loaded := e.loaded
		e.mu.Unlock()
		if loaded {
			return e, nil
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loaded {
		return e, nil
	}
	got, err := s.loadSpend(ctx, s.call, k, now)
	if err != nil {
		return nil, err
	}
	// Added, not set: charges recorded while an earlier load failed (see
	// record) are already on the entry.
	e.total += got.total
	if e.days == nil {
		e.days = got.days
	} else {
		for d, c := range got.days {
			e.days[d] += c
		}
	}
	e.loaded = true
	return e, nil
}

// record adds a charge of cost micro-dollars made at t to the account's
// and key's entries, loading them first if needed. It is called before the
// generation is queued.
//
// If an entry cannot be loaded (the database cannot be read), the charge is
// still counted, on an entry marked not loaded; its later load adds the
// database's committed spend, which by then may include this charge too.
// So a read failure can make spend look higher than it is, never lower.
func (t *spendTracker) record(s *Store, accountID int64, keyID string, cost int64, at time.Time) {
	t.apply(s, spendKey{account: accountID}, cost, at)
	if keyID != "" {
		t.apply(s, spendKey{account: accountID, key: keyID}, cost, at)
	}
}

func (t *spendTracker) apply(s *Store, k spendKey, cost int64, at time.Time) {
	// A charge must wait for the entry's load (see Spend), but has no
	// caller context: the load is bounded by QueryTimeout. (On the
	// server's path the entries were loaded by admission already.)
	e, err := t.entry(context.Background(), s, k, at)
	if err != nil {
		s.Logger().Error("spend tracking: load failed; spend may be counted twice until restart",
			"account_id", k.account, "key_id", k.key, "error", err)
		t.mu.Lock()
		e = t.entries[k]
		t.mu.Unlock()
	}
	e.mu.Lock()
	e.add(cost, at)
	e.mu.Unlock()
}

// unrecord takes back a charge the ledger dropped as unstorable (never one
// it merely failed to commit: that one is retried, and stays counted). It
// never loads: record created both entries.
func (t *spendTracker) unrecord(accountID int64, keyID string, cost int64, at time.Time) {
	keys := []spendKey{{account: accountID}}
	if keyID != "" {
		keys = append(keys, spendKey{account: accountID, key: keyID})
	}
	for _, k := range keys {
		t.mu.Lock()
		e := t.entries[k]
		t.mu.Unlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		e.add(-cost, at)
		e.mu.Unlock()
	}
}

// add adds cost (which may be negative, to take a charge back) at t.
// Callers hold e.mu.
func (e *spendEntry) add(cost int64, at time.Time) {
	e.total += cost
	if e.days == nil {
		e.days = make(map[int32]int64)
	}
	d := store.DayNumber(at)
	e.days[d] += cost
	if len(e.days) > 64 {
		// Keep the current and the previous month: caps look at no more.
		oldest := store.DayNumber(store.StartOfMonth(store.StartOfMonth(at).AddDate(0, 0, -1)))
		for day := range e.days {
			if day < oldest {
				delete(e.days, day)
			}
		}
	}
}

// period returns the charges of p's day and of p's month. Callers hold
// e.mu (or own e).
func (e *spendEntry) period(p store.Period) (dayTotal, monthTotal int64) {
	dayTotal = e.days[p.Day]
	for d, c := range e.days {
		if d >= p.MonthStart && d < p.MonthEnd {
			monthTotal += c
		}
	}
	return dayTotal, monthTotal
}

// loadSpend reads the committed spend of k from the database: for an
// account its total_used and its charges per day over all keys, for a key
// its own charges per day, from the start of the month before now's,
// through db (the call path's pool for the call path).
func (s *Store) loadSpend(ctx context.Context, db *sql.DB, k spendKey, now time.Time) (*spendEntry, error) {
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	from := store.DayNumber(store.StartOfMonth(store.StartOfMonth(now).AddDate(0, 0, -1)))
	e := &spendEntry{days: make(map[int32]int64)}
	var (
		rows *sql.Rows
		err  error
	)
	if k.key == "" {
		err = db.QueryRowContext(ctx, `SELECT total_used_micros FROM accounts WHERE id = ?`, k.account).Scan(&e.total)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			// An unknown account has spent nothing; its charges will
			// be dropped by the ledger.
			return nil, fmt.Errorf("load spend of account %d: %w", k.account, readErr(ctx, err))
		}
		rows, err = db.QueryContext(ctx,
			`SELECT day, SUM(cost_micros) FROM spend_daily WHERE account_id = ? AND day >= ? GROUP BY day`,
			k.account, from)
	} else {
		rows, err = db.QueryContext(ctx,
			`SELECT day, cost_micros FROM spend_daily WHERE account_id = ? AND key_id = ? AND day >= ?`,
			k.account, k.key, from)
	}
	if err != nil {
		return nil, fmt.Errorf("load spend: %w", readErr(ctx, err))
	}
	defer rows.Close()
	var slice store.Slicer // an account of many keys has many rows
	for rows.Next() {
		slice.Yield()
		var (
			day  int32
			cost int64
		)
		if err := rows.Scan(&day, &cost); err != nil {
			return nil, fmt.Errorf("load spend: scan: %w", readErr(ctx, err))
		}
		e.days[day] = cost
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load spend: %w", readErr(ctx, err))
	}
	return e, nil
}
