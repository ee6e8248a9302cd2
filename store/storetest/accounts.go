package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

func testEnsureAccount(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()

	a, created, err := s.EnsureAccount(ctx, "acme")
	is.NoErr(err)                                     // create
	is.True(created)                                  // first call creates
	is.Equal(a.Name, "acme")                          // name
	is.Equal(a.Balance.String(), "0.000000")          // zero balance
	is.Equal(a.CreatedAt, clock.Now())                // created from the clock
	is.True(a.DailyCap == nil && a.MonthlyCap == nil) // no caps

	again, created, err := s.EnsureAccount(ctx, "acme")
	is.NoErr(err)            // ensure again
	is.True(!created)        // second call finds it
	is.Equal(again.ID, a.ID) // same account

	byName, err := s.AccountByName(ctx, "acme")
	is.NoErr(err)             // by name
	is.Equal(byName.ID, a.ID) // same account
	_, err = s.AccountByName(ctx, "nobody")
	is.True(errors.Is(err, store.ErrNotFound)) // unknown name
	_, err = s.AccountByID(ctx, 999)
	is.True(errors.Is(err, store.ErrNotFound)) // unknown id

	_, _, err = s.EnsureAccount(ctx, "other")
	is.NoErr(err) // second account
	n, err := s.CountAccounts(ctx)
	is.NoErr(err)  // count
	is.Equal(n, 2) // two accounts

	for _, bad := range []string{"", " acme", "acme ", "a\x00b", "a\nb", strings.Repeat("x", 129), "\xff"} {
		_, _, err := s.EnsureAccount(ctx, bad)
		is.True(errors.Is(err, store.ErrInvalid)) // bad name rejected
	}
}

func testAddCredits(t *testing.T, open Opener) {
	is := is.New(t)
	s, _ := newTestDB(t, open)
	ctx := context.Background()
	a, _, err := s.EnsureAccount(ctx, "acme")
	is.NoErr(err) // account

	a, err = s.AddCredits(ctx, a.ID, Dec(t, "10"), "top-up")
	is.NoErr(err)                              // add credits
	is.Equal(a.Balance.String(), "10.000000")  // balance raised
	is.Equal(a.TotalUsed.String(), "0.000000") // nothing used
	a, err = s.AddCredits(ctx, a.ID, Dec(t, "0.000001"), "")
	is.NoErr(err)                             // smallest credit
	is.Equal(a.Balance.String(), "10.000001") // exact

	for _, bad := range []string{"0", "-1", "-0.000001", "0.0000001", "NaN"} {
		_, err := s.AddCredits(ctx, a.ID, Dec(t, bad), "")
		is.True(errors.Is(err, store.ErrInvalid)) // non-positive or inexact amount rejected
	}
	_, err = s.AddCredits(ctx, 999, Dec(t, "1"), "")
	is.True(errors.Is(err, store.ErrNotFound)) // unknown account

	is.Equal(QueryInt(t, s, `SELECT COUNT(*) FROM credit_transactions`), int64(2)) // only the accepted credits are rows
	CheckLedger(t, s)
}
