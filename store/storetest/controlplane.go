package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/svcgw/svcgw/store"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

func testAdminTokens(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := store.WithActor(context.Background(), store.ActorCLI)

	secret, tok, err := s.CreateAdminToken(ctx, "billing", false)
	is.NoErr(err)
	is.True(strings.HasPrefix(secret, store.AdminSecretPrefix)) // admin prefix
	is.True(strings.HasPrefix(tok.ID, "adm_"))                  // public id
	_, _, err = s.CreateAdminToken(ctx, "billing", true)
	is.True(errors.Is(err, store.ErrConflict)) // an active token has the name
	roSecret, ro, err := s.CreateAdminToken(ctx, "frontend", true)
	is.NoErr(err)
	is.True(ro.ReadOnly)

	got, err := s.AuthenticateAdmin(ctx, secret)
	is.NoErr(err)
	is.Equal(got.Name, "billing")
	is.True(!got.ReadOnly)
	got, err = s.AuthenticateAdmin(ctx, roSecret)
	is.NoErr(err)
	is.True(got.ReadOnly)
	_, err = s.AuthenticateAdmin(ctx, store.AdminSecretPrefix+"nope")
	is.True(errors.Is(err, store.ErrNotFound)) // unknown
	// An API key's secret is never an admin token, whatever it hashes to.
	_, err = s.AuthenticateAdmin(ctx, store.SecretPrefix+strings.TrimPrefix(secret, store.AdminSecretPrefix))
	is.True(errors.Is(err, store.ErrNotFound))

	rev, err := s.RevokeAdminToken(ctx, "billing")
	is.NoErr(err)
	is.True(!rev.RevokedAt.IsZero())
	_, err = s.AuthenticateAdmin(ctx, secret)
	is.True(errors.Is(err, store.ErrNotFound)) // revoked: refused at once
	_, _, err = s.CreateAdminToken(ctx, "billing", false)
	is.NoErr(err) // the name is free again
	_, err = s.RevokeAdminToken(ctx, "nobody")
	is.True(errors.Is(err, store.ErrNotFound))

	list, err := s.ListAdminTokens(ctx)
	is.NoErr(err)
	is.Equal(len(list), 3)

	entries, _, err := s.ListAudit(ctx, store.AuditQuery{})
	is.NoErr(err)
	var actions []string
	for _, e := range entries {
		is.Equal(e.Actor, store.ActorCLI)
		is.True(!strings.Contains(string(e.After), secret)) // never a secret
		actions = append(actions, e.Action)
	}
	is.Equal(actions, []string{store.AuditAdminTokenCreate, store.AuditAdminTokenRevoke, store.AuditAdminTokenCreate, store.AuditAdminTokenCreate})
}

func testAudit_EveryChange(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := store.WithActor(context.Background(), "billing-bot")

	a, err := s.CreateAccount(ctx, "acme", &store.CreditRequest{Amount: Dec(t, "10")})
	is.NoErr(err)
	is.Equal(a.Balance.String(), "10.000000")
	_, err = s.CreateAccount(ctx, "acme", nil)
	is.True(errors.Is(err, store.ErrConflict)) // taken
	daily := Dec(t, "2.5")
	_, err = s.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { c.Daily = &daily })
	is.NoErr(err)
	exp := clock.Now().Add(time.Hour)
	_, k, err := s.IssueKey(ctx, a.ID, "web", store.KeyLimits{ExpiresAt: &exp})
	is.NoErr(err)
	is.Equal(*k.Limits.ExpiresAt, exp)
	rpm := int64(60)
	_, err = s.UpdateKeyLimits(ctx, k.ID, func(l *store.KeyLimits) { l.RPM = &rpm; l.ExpiresAt = nil })
	is.NoErr(err)
	_, err = s.RevokeKey(ctx, k.ID)
	is.NoErr(err)
	_, err = s.RevokeKey(ctx, k.ID)
	is.NoErr(err) // changes nothing, so records nothing

	entries, more, err := s.ListAudit(ctx, store.AuditQuery{})
	is.NoErr(err)
	is.True(!more)
	type step struct{ action, target string }
	var got []step
	for _, e := range entries {
		is.Equal(e.Actor, "billing-bot")
		got = append(got, step{e.Action, e.Target})
	}
	is.Equal(got, []step{
		{store.AuditKeyRevoke, k.ID}, {store.AuditKeyUpdate, k.ID}, {store.AuditKeyCreate, k.ID},
		{store.AuditAccountUpdate, "acme"}, {store.AuditCreditsAdd, "acme"}, {store.AuditAccountCreate, "acme"},
	})
	// before → after of the cap change.
	var before, after struct {
		DailyCap *string `json:"daily_cap"`
	}
	is.NoErr(json.Unmarshal(entries[3].Before, &before))
	is.NoErr(json.Unmarshal(entries[3].After, &after))
	is.True(before.DailyCap == nil)
	is.Equal(*after.DailyCap, "2.500000")
	is.True(entries[5].Before == nil) // a creation has no before

	// Paging: two at a time, newest first, with nothing lost.
	var paged []int64
	q := store.AuditQuery{Limit: 2}
	for {
		page, more, err := s.ListAudit(ctx, q)
		is.NoErr(err)
		for _, e := range page {
			paged = append(paged, e.ID)
		}
		if !more {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	is.Equal(len(paged), 6)
	is.Equal(paged[0], entries[0].ID)

	// No actor in the context: still recorded.
	_, _, err = s.EnsureAccount(context.Background(), "anon")
	is.NoErr(err)
	entries, _, err = s.ListAudit(ctx, store.AuditQuery{Limit: 1})
	is.NoErr(err)
	is.Equal(entries[0].Actor, "unknown") // store.actorUnknown
}

func testKeyExpiry(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, _, err := s.EnsureAccount(ctx, "acme")
	is.NoErr(err)
	past := clock.Now().Add(-time.Second)
	_, _, err = s.IssueKey(ctx, a.ID, "old", store.KeyLimits{ExpiresAt: &past})
	is.True(errors.Is(err, store.ErrInvalid)) // created expired
	exp := clock.Now().Add(time.Minute)
	secret, k, err := s.IssueKey(ctx, a.ID, "trial", store.KeyLimits{ExpiresAt: &exp})
	is.NoErr(err)
	_, err = s.Authenticate(ctx, secret)
	is.NoErr(err) // cached from here on
	clock.Advance(time.Minute)
	_, err = s.Authenticate(ctx, secret)
	var ee *store.ExpiredError
	is.True(errors.As(err, &ee)) // expired, though cached
	is.True(errors.Is(err, store.ErrExpired))
	is.Equal(ee.KeyID, k.ID)
	is.Equal(ee.At, exp)
	// Extending it brings it back.
	later := clock.Now().Add(time.Hour)
	_, err = s.UpdateKeyLimits(ctx, k.ID, func(l *store.KeyLimits) { l.ExpiresAt = &later })
	is.NoErr(err)
	_, err = s.Authenticate(ctx, secret)
	is.NoErr(err)
	keys, err := s.ListKeys(ctx, a.ID)
	is.NoErr(err)
	is.Equal(*keys[0].Limits.ExpiresAt, later)
}

func testCredit(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := store.WithActor(context.Background(), "stripe-webhook")
	a, _, err := s.EnsureAccount(ctx, "acme")
	is.NoErr(err)

	req := store.CreditRequest{Amount: Dec(t, "5.00"), Reference: "stripe:pi_1", IdempotencyKey: "evt_1"}
	first, err := s.Credit(ctx, a.ID, req)
	is.NoErr(err)
	is.True(!first.Replayed)
	is.Equal(first.Account.Balance.String(), "5.000000")
	is.Equal(first.Tx.BalanceAfter.String(), "5.000000")
	is.Equal(first.Tx.Actor, "stripe-webhook")
	is.Equal(first.Tx.Reference, "stripe:pi_1")

	again, err := s.Credit(ctx, a.ID, req)
	is.NoErr(err)
	is.True(again.Replayed) // the first's transaction
	is.Equal(again.Tx.ID, first.Tx.ID)
	is.Equal(again.Tx.BalanceAfter.String(), "5.000000")
	acct, err := s.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(acct.Balance.String(), "5.000000") // credited once

	other := req
	other.Amount = Dec(t, "6")
	_, err = s.Credit(ctx, a.ID, other)
	is.True(errors.Is(err, store.ErrIdempotencyMismatch)) // same key, another body
	is.True(errors.Is(err, store.ErrConflict))

	// Refunds go down to zero, never below.
	_, err = s.Credit(ctx, a.ID, store.CreditRequest{Amount: Dec(t, "-5.000001")})
	is.True(errors.Is(err, store.ErrNegativeBalance))
	is.True(errors.Is(err, store.ErrInvalid))
	r, err := s.Credit(ctx, a.ID, store.CreditRequest{Amount: Dec(t, "-5"), Note: "refund"})
	is.NoErr(err)
	is.Equal(r.Account.Balance.String(), "0.000000")
	_, err = s.Credit(ctx, a.ID, store.CreditRequest{Amount: Dec(t, "0")})
	is.True(errors.Is(err, store.ErrInvalid)) // zero
	_, err = s.Credit(ctx, a.ID, store.CreditRequest{Amount: Dec(t, "0.0000001")})
	is.True(errors.Is(err, store.ErrInvalid)) // seven decimals
	_, err = s.Credit(ctx, 999, store.CreditRequest{Amount: Dec(t, "1")})
	is.True(errors.Is(err, store.ErrNotFound))

	txs, more, err := s.ListCredits(ctx, a.ID, store.CreditQuery{Limit: 1})
	is.NoErr(err)
	is.True(more)
	is.Equal(txs[0].Amount.String(), "-5.000000") // newest first
	is.Equal(txs[0].Note, "refund")
	txs, more, err = s.ListCredits(ctx, a.ID, store.CreditQuery{Before: txs[0].ID})
	is.NoErr(err)
	is.True(!more)
	is.Equal(len(txs), 1)
	is.Equal(txs[0].IdempotencyKey, "evt_1")
}

// TestCredit_ConcurrentRetries sends one credit ten times at once, through
// two handles on one database (two instances, on PostgreSQL): it counts
// once.
func testCredit_ConcurrentRetries(t *testing.T, open Opener) {
	is := is.New(t)
	s1 := open(t, store.Options{})
	s2 := open(t, store.Options{})
	ctx := context.Background()
	a, _, err := s1.EnsureAccount(ctx, "acme")
	is.NoErr(err)
	req := store.CreditRequest{Amount: Dec(t, "5"), IdempotencyKey: "evt_concurrent"}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      = map[int64]int{}
		replayed int
	)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := []store.DB{s1, s2}[i%2]
			r, err := db.Credit(ctx, a.ID, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("retry %d: %v", i, err)
				return
			}
			ids[r.Tx.ID]++
			if r.Replayed {
				replayed++
			}
		}()
	}
	wg.Wait()
	is.Equal(len(ids), 1) // one transaction
	is.Equal(replayed, 9) // the rest replayed it
	acct, err := s2.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(acct.Balance.String(), "5.000000")
	txs, _, err := s2.ListCredits(ctx, a.ID, store.CreditQuery{})
	is.NoErr(err)
	is.Equal(len(txs), 1)
}

func testListAccounts(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := context.Background()
	for i := range 5 {
		_, _, err := s.EnsureAccount(ctx, fmt.Sprintf("acct-%d", 4-i))
		is.NoErr(err)
	}
	var names []string
	q := store.AccountQuery{Limit: 2}
	for {
		page, more, err := s.ListAccounts(ctx, q)
		is.NoErr(err)
		for _, a := range page {
			names = append(names, a.Name)
		}
		if !more {
			break
		}
		q.After = page[len(page)-1].Name
	}
	is.Equal(names, []string{"acct-0", "acct-1", "acct-2", "acct-3", "acct-4"})
	_, _, err := s.ListAccounts(ctx, store.AccountQuery{Limit: 501})
	is.True(errors.Is(err, store.ErrInvalid))
}
