package money_test

import (
	"errors"
	"math"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
)

func TestMicros_String(t *testing.T) {
	for _, c := range []struct {
		m    money.Micros
		want string
	}{
		{0, "0.000000"},
		{1, "0.000001"},
		{123, "0.000123"},
		{1_500_000, "1.500000"},
		{-2_500_000, "-2.500000"},
		{math.MaxInt64, "9223372036854.775807"},
		{math.MinInt64, "-9223372036854.775808"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("Micros(%d).String() = %q, want %q", int64(c.m), got, c.want)
		}
		// The decimal renders the same, and comes back exactly.
		d := c.m.Decimal()
		if got := d.Text('f'); got != c.want {
			t.Errorf("Micros(%d).Decimal() = %s, want %s", int64(c.m), got, c.want)
		}
		if back, err := money.FromDecimal(d); err != nil || back != c.m {
			t.Errorf("FromDecimal(%s) = %d, %v; want %d", &d, int64(back), err, int64(c.m))
		}
	}
}

func TestFromDecimal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want money.Micros
		ok   bool
	}{
		{"1.5", 1_500_000, true},
		{"1.5000000", 1_500_000, true}, // trailing zeros past six places are exact
		{"0.000001", 1, true},
		{"-3", -3_000_000, true},
		{"0.0000001", 0, false}, // a seventh place
		{"NaN", 0, false},
		{"Infinity", 0, false},
		{"9223372036854.775808", 0, false}, // one past an int64
		{"1E+100000", 0, false},
	} {
		d, _, err := apd.NewFromString(c.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := money.FromDecimal(*d)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("FromDecimal(%s) = %d, %v; want %d", c.in, int64(got), err, int64(c.want))
		}
		if !c.ok && !errors.Is(err, money.ErrInexact) {
			t.Errorf("FromDecimal(%s) = %d, %v; want ErrInexact", c.in, int64(got), err)
		}
	}
}
