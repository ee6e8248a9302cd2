package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestToMicros(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1_000_000, true},
		{"1.5", 1_500_000, true},
		{"1.5000000000", 1_500_000, true}, // trailing zeros are exact
		{"0.000001", 1, true},
		{"-2.25", -2_250_000, true},
		{"9223372036854.775807", 9223372036854775807, true},
		{"1E+3", 1_000_000_000, true},
		{"0.0000001", 0, false}, // seventh decimal
		{"1.2345678", 0, false},
		{"9223372036854.775808", 0, false}, // int64 overflow
		{"1E+30", 0, false},
		{"NaN", 0, false},
		{"Infinity", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			is := is.New(t)
			got, err := toMicros(dec(t, tt.in))
			if !tt.ok {
				is.True(errors.Is(err, ErrInvalid)) // rejected as invalid
				return
			}
			is.NoErr(err)          // converts
			is.Equal(got, tt.want) // micros
			in, back := dec(t, tt.in), fromMicros(got)
			is.Equal(back.Cmp(&in), 0) // converts back to the same value
		})
	}
	is.New(t).Equal(func() string { d := fromMicros(9_500_000); return d.Text('f') }(), "9.500000") // six places
}

func TestEnsureAccount(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
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
		is.True(errors.Is(err, ErrNotFound)) // unknown name
		_, err = s.AccountByID(ctx, 999)
		is.True(errors.Is(err, ErrNotFound)) // unknown id

		_, _, err = s.EnsureAccount(ctx, "other")
		is.NoErr(err) // second account
		n, err := s.CountAccounts(ctx)
		is.NoErr(err)  // count
		is.Equal(n, 2) // two accounts

		for _, bad := range []string{"", " acme", "acme ", "a\x00b", "a\nb", strings.Repeat("x", 129), "\xff"} {
			_, _, err := s.EnsureAccount(ctx, bad)
			is.True(errors.Is(err, ErrInvalid)) // bad name rejected
		}
	})
}

func TestAddCredits(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, _ := newTestDB(t, open)
		ctx := context.Background()
		a, _, err := s.EnsureAccount(ctx, "acme")
		is.NoErr(err) // account

		a, err = s.AddCredits(ctx, a.ID, dec(t, "10"), "top-up")
		is.NoErr(err)                              // add credits
		is.Equal(a.Balance.String(), "10.000000")  // balance raised
		is.Equal(a.TotalUsed.String(), "0.000000") // nothing used
		a, err = s.AddCredits(ctx, a.ID, dec(t, "0.000001"), "")
		is.NoErr(err)                             // smallest credit
		is.Equal(a.Balance.String(), "10.000001") // exact

		for _, bad := range []string{"0", "-1", "-0.000001", "0.0000001", "NaN"} {
			_, err := s.AddCredits(ctx, a.ID, dec(t, bad), "")
			is.True(errors.Is(err, ErrInvalid)) // non-positive or inexact amount rejected
		}
		_, err = s.AddCredits(ctx, 999, dec(t, "1"), "")
		is.True(errors.Is(err, ErrNotFound)) // unknown account

		is.Equal(queryInt(t, s, `SELECT COUNT(*) FROM credit_transactions`), int64(2)) // only the accepted credits are rows
		checkLedger(t, s)
	})
}
