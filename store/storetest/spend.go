package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

// CheckSpendDaily asserts that spend_daily holds exactly the sums of the
// generations, per account, key and UTC day.
func CheckSpendDaily(t testing.TB, s store.DB) {
	t.Helper()
	bad := QueryInt(t, s, `
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

func testSpend_DaysAndMonths(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	s, clock := newTestDB(t, open)
	a, k, _ := NewAccount(t, s, "acme", "100")
	_, k2, err := s.CreateKey(ctx, a.ID, "other")
	is.NoErr(err)

	at := func(ts time.Time, id string, key store.Key, cost string) {
		g := Gen(t, id, key, cost)
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
	is.Equal(sp, store.Spend{Total: 7e6, AccountDay: 6e6, AccountMonth: 7e6, KeyDay: 2e6, KeyMonth: 3e6}) // January 31st

	at(feb1, "feb1", k, "8")
	is.NoErr(s.Sync(ctx))
	sp, err = s.Spend(ctx, a.ID, k.ID, feb1)
	is.NoErr(err)
	is.Equal(sp, store.Spend{Total: 15e6, AccountDay: 8e6, AccountMonth: 8e6, KeyDay: 8e6, KeyMonth: 8e6}) // a new day and month

	// After a restart the same figures come from spend_daily.
	is.NoErr(s.Sync(ctx))
	CheckSpendDaily(t, s)
	for _, now := range []time.Time{jan31, feb1} {
		want, err := s.Spend(ctx, a.ID, k.ID, now)
		is.NoErr(err)
		got, err := s.PeriodSpend(ctx, a.ID, k.ID, now)
		is.NoErr(err)
		is.Equal(got, want) // memory and database agree
		// The account's alone (the management API's list): on SQLite
		// from the roll-ups, which must say the same.
		got, err = s.PeriodSpend(ctx, a.ID, "", now)
		is.NoErr(err)
		is.Equal(got, store.Spend{Total: want.Total, AccountDay: want.AccountDay, AccountMonth: want.AccountMonth})
	}
	got, err := s.PeriodSpend(ctx, 999, "", feb1)
	is.NoErr(err)
	is.Equal(got, store.Spend{}) // an unknown account has spent nothing
}

func testBudget(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := newTestDB(t, open)
	a, k, _ := NewAccount(t, s, "acme", "10")
	s.RecordGeneration(Gen(t, "g", k, "3"))
	is.NoErr(s.Sync(ctx))
	b, err := s.Budget(ctx, a.ID)
	is.NoErr(err)
	is.Equal(b, store.Budget{Credits: 10e6, DailyCap: store.NoCap, MonthlyCap: store.NoCap}) // credits are unchanged by charges
	_, err = s.Budget(ctx, 999)
	is.True(errors.Is(err, store.ErrNotFound)) // unknown account
}

func testUpdateAccountCaps(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := newTestDB(t, open)
	a, _, _ := NewAccount(t, s, "acme", "10")

	got, err := s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { d := Dec(t, "5"); c.Daily = &d })
	is.NoErr(err)
	is.Equal(got.DailyCap.String(), "5.000000") // daily set
	is.True(got.MonthlyCap == nil)              // monthly untouched
	got, err = s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { m := Dec(t, "0"); c.Monthly = &m })
	is.NoErr(err)
	is.Equal(got.DailyCap.String(), "5.000000")   // daily kept
	is.Equal(got.MonthlyCap.String(), "0.000000") // a zero cap is allowed
	b, err := s.Budget(ctx, a.ID)
	is.NoErr(err)
	is.Equal(b, store.Budget{Credits: 10e6, DailyCap: 5e6, MonthlyCap: 0})

	got, err = s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { c.Daily = nil })
	is.NoErr(err)
	is.True(got.DailyCap == nil) // cleared

	for _, v := range []string{"-1", "0.0000001"} {
		_, err = s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { d := Dec(t, v); c.Daily = &d })
		is.True(errors.Is(err, store.ErrInvalid)) // rejected
	}
	_, err = s.UpdateAccountCaps(ctx, 999, func(*store.Caps) {})
	is.True(errors.Is(err, store.ErrNotFound)) // unknown account
}

func testUpdateKeyLimits(t *testing.T, open Opener) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := newTestDB(t, open)
	_, k, secret := NewAccount(t, s, "acme", "10")
	is.Equal(k.Limits, store.KeyLimits{}) // none by default

	rpm := int64(60)
	got, err := s.UpdateKeyLimits(ctx, k.ID, func(l *store.KeyLimits) {
		d := Dec(t, "1.5")
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
	_, err = s.UpdateKeyLimits(ctx, k.ID, func(l *store.KeyLimits) { l.TPM = &neg })
	is.True(errors.Is(err, store.ErrInvalid)) // negative rate
	_, err = s.UpdateKeyLimits(ctx, "key_nope", func(*store.KeyLimits) {})
	is.True(errors.Is(err, store.ErrNotFound)) // unknown key

	got, err = s.UpdateKeyLimits(ctx, k.ID, func(l *store.KeyLimits) { *l = store.KeyLimits{} })
	is.NoErr(err)
	is.Equal(got.Limits, store.KeyLimits{}) // all cleared
}

// testAccountRateLimits: an account's requests and tokens per minute are
// set and removed with its caps, refused when negative, audited, and read
// with every one of its keys, by this process at once and by another
// within its authentication cache's TTL.
func testAccountRateLimits(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := store.WithActor(context.Background(), "ops")
	a, k, secret := NewAccount(t, s, "acme", "10")
	secret2, _, err := s.CreateKey(ctx, a.ID, "second")
	is.NoErr(err)
	is.True(a.RPM == nil && a.TPM == nil) // none by default
	got, err := s.Authenticate(ctx, secret)
	is.NoErr(err)
	is.True(got.AccountRPM == nil && got.AccountTPM == nil) // cached now, with none

	rpm, tpm := int64(2), int64(5000)
	daily := Dec(t, "3")
	acct, err := s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { c.RPM, c.TPM, c.Daily = &rpm, &tpm, &daily })
	is.NoErr(err)
	is.Equal(*acct.RPM, int64(2))
	is.Equal(*acct.TPM, int64(5000))
	is.Equal(acct.DailyCap.String(), "3.000000")
	acct, err = s.AccountByName(ctx, "acme")
	is.NoErr(err)
	is.Equal(*acct.RPM, int64(2)) // stored
	is.Equal(*acct.TPM, int64(5000))
	accts, _, err := s.ListAccounts(ctx, store.AccountQuery{})
	is.NoErr(err)
	is.Equal(*accts[0].RPM, int64(2)) // listed

	// Every key of the account carries its limits, this process's cached
	// ones at once.
	for _, sec := range []string{secret, secret2} {
		got, err := s.Authenticate(ctx, sec)
		is.NoErr(err)
		is.Equal(got.AccountID, a.ID)
		is.Equal(*got.AccountRPM, int64(2))
		is.Equal(*got.AccountTPM, int64(5000))
		is.True(got.Limits.RPM == nil) // the key's own are untouched
	}
	keys, err := s.ListKeys(ctx, a.ID)
	is.NoErr(err)
	is.Equal(*keys[0].AccountRPM, int64(2))

	// Another process sees a change within the TTL.
	other := open(t, store.Options{Now: clock.Now})
	got, err = other.Authenticate(ctx, secret)
	is.NoErr(err)
	is.Equal(*got.AccountRPM, int64(2))
	_, err = s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { c.RPM = nil })
	is.NoErr(err)
	clock.Advance(store.DefaultAuthCacheTTL)
	got, err = other.Authenticate(ctx, secret)
	is.NoErr(err)
	is.True(got.AccountRPM == nil)         // removed, seen by the other process
	is.Equal(*got.AccountTPM, int64(5000)) // kept
	is.Equal(got.ID, k.ID)

	// A negative limit is refused and changes nothing.
	neg := int64(-1)
	for _, set := range []func(*store.Caps){
		func(c *store.Caps) { c.RPM = &neg },
		func(c *store.Caps) { c.TPM = &neg },
	} {
		_, err = s.UpdateAccountCaps(ctx, a.ID, set)
		is.True(errors.Is(err, store.ErrInvalid))
	}
	acct, err = s.AccountByName(ctx, "acme")
	is.NoErr(err)
	is.True(acct.RPM == nil)
	is.Equal(*acct.TPM, int64(5000))

	// Audited: before → after of both changes.
	entries, _, err := s.ListAudit(ctx, store.AuditQuery{Limit: 2})
	is.NoErr(err)
	type limits struct {
		RPM *int64 `json:"rpm"`
		TPM *int64 `json:"tpm"`
	}
	var before, after limits
	is.Equal(entries[0].Action, store.AuditAccountUpdate)
	is.Equal(entries[0].Actor, "ops")
	is.NoErr(json.Unmarshal(entries[0].Before, &before))
	is.NoErr(json.Unmarshal(entries[0].After, &after))
	is.Equal(*before.RPM, int64(2))
	is.True(after.RPM == nil)
	is.Equal(*after.TPM, int64(5000))
	before, after = limits{}, limits{}
	is.NoErr(json.Unmarshal(entries[1].Before, &before))
	is.NoErr(json.Unmarshal(entries[1].After, &after))
	is.True(before.RPM == nil && before.TPM == nil)
	is.Equal(*after.RPM, int64(2))
}
