package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/svcgw/svcgw/store"
)

// Clock is an injectable clock (Options.Now) that tests move by hand.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at 2025-03-10 12:00 UTC.
func NewClock() *Clock {
	return &Clock{t: time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)}
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Dec parses a decimal literal or fails the test.
func Dec(t testing.TB, s string) apd.Decimal {
	t.Helper()
	d, _, err := apd.NewFromString(s)
	if err != nil {
		t.Fatalf("parse decimal %q: %v", s, err)
	}
	return *d
}

// NewAccount creates an account with the given credits and one key.
func NewAccount(t testing.TB, s store.DB, name, credits string) (store.Account, store.Key, string) {
	t.Helper()
	ctx := context.Background()
	a, created, err := s.EnsureAccount(ctx, name)
	if err != nil || !created {
		t.Fatalf("ensure account %q: created=%v err=%v", name, created, err)
	}
	if credits != "" {
		if a, err = s.AddCredits(ctx, a.ID, Dec(t, credits), "test"); err != nil {
			t.Fatalf("add credits: %v", err)
		}
	}
	secret, k, err := s.CreateKey(ctx, a.ID, "")
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return a, k, secret
}

// CheckLedger asserts the reconciliation invariant for every account:
// balance = credits - costs and total_used = costs; and that spend_daily
// holds the generations' sums.
func CheckLedger(t testing.TB, s store.DB) {
	t.Helper()
	Query(t, s, `
		SELECT a.id, a.balance_micros, a.total_used_micros,
		       (SELECT COALESCE(SUM(amount_micros), 0) FROM credit_transactions c WHERE c.account_id = a.id),
		       (SELECT COALESCE(SUM(cost_micros), 0) FROM generations g WHERE g.account_id = a.id)
		FROM accounts a`, nil, func(r store.Scanner) error {
		var id, balance, used, credits, costs int64
		if err := r.Scan(&id, &balance, &used, &credits, &costs); err != nil {
			return err
		}
		if balance != credits-costs || used != costs {
			t.Errorf("account %d: balance %d, total_used %d; credits %d, costs %d", id, balance, used, credits, costs)
		}
		return nil
	})
	spendBad := QueryInt(t, s, `
		SELECT COUNT(*) FROM (
			SELECT account_id, COALESCE(key_id, '') AS key_id, created_at / 86400000 AS day,
			       COUNT(*) AS requests, SUM(cost_micros) AS cost
			FROM generations GROUP BY 1, 2, 3
		) g FULL OUTER JOIN spend_daily d USING (account_id, key_id, day)
		WHERE g.cost IS DISTINCT FROM d.cost_micros OR g.requests IS DISTINCT FROM d.requests`)
	if spendBad != 0 {
		t.Errorf("spend_daily disagrees with the generations on %d (account, key, day)s", spendBad)
	}
}
