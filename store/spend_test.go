package store

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// checkSpendDaily asserts that spend_daily holds exactly the sums of the
// generations, per account, key and UTC day.
func checkSpendDaily(t testing.TB, s DB) {
	t.Helper()
	bad := queryInt(t, s, `
		SELECT COUNT(*) FROM (
			SELECT account_id, COALESCE(key_id, '') AS key_id, created_at / 86400000 AS day,
			       COUNT(*) AS requests, SUM(cost_micros) AS cost
			FROM generations GROUP BY 1, 2, 3
		) g FULL OUTER JOIN spend_daily d USING (account_id, key_id, day)
		WHERE g.cost IS DISTINCT FROM d.cost_micros OR g.requests IS DISTINCT FROM d.requests`)
	if bad != 0 {
		t.Errorf("spend_daily disagrees with generations on %d (account, key, day) rows", bad)
	}
}

func TestSpend_CountsQueuedChargesAtOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	// Nothing commits until Sync: the charges are only queued.
	s := openTestStore(t, path, Options{Now: clock.Now, BatchSize: 1 << 20, BatchInterval: time.Hour})
	a, k, _ := newAccount(t, s, "acme", "10")

	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)         // spend
	is.Equal(sp, Spend{}) // nothing yet
	for i := range 3 {
		s.RecordGeneration(gen(t, "g"+strconv.Itoa(i), k, "0.25"))
	}
	sp, err = s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp, Spend{Total: 750000, AccountDay: 750000, AccountMonth: 750000, KeyDay: 750000, KeyMonth: 750000}) // queued, counted

	is.NoErr(s.Sync(ctx)) // commit
	sp2, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp2, sp) // committing changes nothing: never counted twice
	db, err := s.PeriodSpend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(db, sp) // the database agrees once committed
	checkLedger(t, s)
	checkSpendDaily(t, s)
}

func TestSpend_DaysAndMonths(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		s, clock := newTestDB(t, open)
		a, k, _ := newAccount(t, s, "acme", "100")
		_, k2, err := s.CreateKey(ctx, a.ID, "other")
		is.NoErr(err)

		at := func(ts time.Time, id string, key Key, cost string) {
			g := gen(t, id, key, cost)
			g.CreatedAt = ts
			s.RecordGeneration(g)
		}
		jan31 := time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC)
		feb1 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		clock.Set(jan31)
		at(jan31.Add(-24*time.Hour), "jan30", k, "1")
		at(jan31, "jan31", k, "2")
		at(jan31, "jan31-other", k2, "4")
		// Spend counts queued charges on SQLite (one writer), committed
		// ones on PostgreSQL (see Postgres.Spend): commit them first.
		is.NoErr(s.Sync(ctx))

		sp, err := s.Spend(ctx, a.ID, k.ID, jan31)
		is.NoErr(err)
		is.Equal(sp, Spend{Total: 7e6, AccountDay: 6e6, AccountMonth: 7e6, KeyDay: 2e6, KeyMonth: 3e6}) // January 31st

		at(feb1, "feb1", k, "8")
		is.NoErr(s.Sync(ctx))
		sp, err = s.Spend(ctx, a.ID, k.ID, feb1)
		is.NoErr(err)
		is.Equal(sp, Spend{Total: 15e6, AccountDay: 8e6, AccountMonth: 8e6, KeyDay: 8e6, KeyMonth: 8e6}) // a new day and month

		// After a restart the same figures come from spend_daily.
		is.NoErr(s.Sync(ctx))
		checkSpendDaily(t, s)
		for _, now := range []time.Time{jan31, feb1} {
			want, err := s.Spend(ctx, a.ID, k.ID, now)
			is.NoErr(err)
			got, err := s.PeriodSpend(ctx, a.ID, k.ID, now)
			is.NoErr(err)
			is.Equal(got, want) // memory and database agree
		}
	})
}

func TestSpend_DroppedChargesAreTakenBack(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, clock := newTestStore(t)
	a, k, _ := newAccount(t, s, "acme", "10")
	s.RecordGeneration(gen(t, "dup", k, "1"))
	s.RecordGeneration(gen(t, "dup", k, "2")) // duplicate id: dropped at commit
	bad := gen(t, "bad-key", k, "4")
	bad.KeyID = "key_nope" // unknown key: dropped at commit
	s.RecordGeneration(bad)
	is.NoErr(s.Sync(ctx))

	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(1e6))  // only the committed charge
	is.Equal(sp.KeyDay, int64(1e6)) // for the key too
	ghost, err := s.Spend(ctx, a.ID, "key_nope", clock.Now())
	is.NoErr(err)
	is.Equal(ghost.KeyDay, int64(0)) // the unknown key's charge was taken back
	checkLedger(t, s)
	checkSpendDaily(t, s)
}

// TestSpend_ConcurrentWithLedger records from many goroutines while others
// read Spend; at the end, memory, spend_daily and generations all agree.
func TestSpend_ConcurrentWithLedger(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, clock := newTestStore(t)
	a, k, _ := newAccount(t, s, "acme", "1000")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				s.RecordGeneration(gen(t, "w"+strconv.Itoa(w)+"-"+strconv.Itoa(i), k, "0.001"))
				if i%10 == 0 {
					if _, err := s.Spend(ctx, a.ID, k.ID, clock.Now()); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	sp, err := s.Spend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(sp.Total, int64(1600*1000)) // every charge once
	is.NoErr(s.Sync(ctx))
	db, err := s.PeriodSpend(ctx, a.ID, k.ID, clock.Now())
	is.NoErr(err)
	is.Equal(db, sp) // and the database agrees
	checkLedger(t, s)
	checkSpendDaily(t, s)
}

func TestBudget(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		s, _ := newTestDB(t, open)
		a, k, _ := newAccount(t, s, "acme", "10")
		s.RecordGeneration(gen(t, "g", k, "3"))
		is.NoErr(s.Sync(ctx))
		b, err := s.Budget(ctx, a.ID)
		is.NoErr(err)
		is.Equal(b, Budget{Credits: 10e6, DailyCap: NoCap, MonthlyCap: NoCap}) // credits are unchanged by charges
		_, err = s.Budget(ctx, 999)
		is.True(errors.Is(err, ErrNotFound)) // unknown account
	})
}

func TestUpdateAccountCaps(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		s, _ := newTestDB(t, open)
		a, _, _ := newAccount(t, s, "acme", "10")

		got, err := s.UpdateAccountCaps(ctx, a.ID, func(c *Caps) { d := dec(t, "5"); c.Daily = &d })
		is.NoErr(err)
		is.Equal(got.DailyCap.String(), "5.000000") // daily set
		is.True(got.MonthlyCap == nil)              // monthly untouched
		got, err = s.UpdateAccountCaps(ctx, a.ID, func(c *Caps) { m := dec(t, "0"); c.Monthly = &m })
		is.NoErr(err)
		is.Equal(got.DailyCap.String(), "5.000000")   // daily kept
		is.Equal(got.MonthlyCap.String(), "0.000000") // a zero cap is allowed
		b, err := s.Budget(ctx, a.ID)
		is.NoErr(err)
		is.Equal(b, Budget{Credits: 10e6, DailyCap: 5e6, MonthlyCap: 0})

		got, err = s.UpdateAccountCaps(ctx, a.ID, func(c *Caps) { c.Daily = nil })
		is.NoErr(err)
		is.True(got.DailyCap == nil) // cleared

		for _, v := range []string{"-1", "0.0000001"} {
			_, err = s.UpdateAccountCaps(ctx, a.ID, func(c *Caps) { d := dec(t, v); c.Daily = &d })
			is.True(errors.Is(err, ErrInvalid)) // rejected
		}
		_, err = s.UpdateAccountCaps(ctx, 999, func(*Caps) {})
		is.True(errors.Is(err, ErrNotFound)) // unknown account
	})
}

func TestUpdateKeyLimits(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		s, _ := newTestDB(t, open)
		_, k, secret := newAccount(t, s, "acme", "10")
		is.Equal(k.Limits, KeyLimits{}) // none by default

		rpm := int64(60)
		got, err := s.UpdateKeyLimits(ctx, k.ID, func(l *KeyLimits) {
			d := dec(t, "1.5")
			l.DailyCap, l.RPM = &d, &rpm
		})
		is.NoErr(err)
		is.Equal(got.Limits.DailyCap.String(), "1.500000")
		is.Equal(*got.Limits.RPM, int64(60))
		is.True(got.Limits.MonthlyCap == nil && got.Limits.TPM == nil) // others untouched

		auth, err := s.Authenticate(ctx, secret)
		is.NoErr(err)
		is.Equal(auth.Limits, got.Limits) // every request sees the limits
		keys, err := s.ListKeys(ctx, k.AccountID)
		is.NoErr(err)
		is.Equal(keys[0].Limits, got.Limits) // and so does the list

		neg := int64(-1)
		_, err = s.UpdateKeyLimits(ctx, k.ID, func(l *KeyLimits) { l.TPM = &neg })
		is.True(errors.Is(err, ErrInvalid)) // negative rate
		_, err = s.UpdateKeyLimits(ctx, "key_nope", func(*KeyLimits) {})
		is.True(errors.Is(err, ErrNotFound)) // unknown key

		got, err = s.UpdateKeyLimits(ctx, k.ID, func(l *KeyLimits) { *l = KeyLimits{} })
		is.NoErr(err)
		is.Equal(got.Limits, KeyLimits{}) // all cleared
	})
}
