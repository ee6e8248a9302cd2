package store

import (
	"errors"
	"testing"

	"github.com/cockroachdb/apd/v3"
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

// dec parses a decimal literal or fails the test.
func dec(t testing.TB, s string) apd.Decimal {
	t.Helper()
	d, _, err := apd.NewFromString(s)
	if err != nil {
		t.Fatalf("parse decimal %q: %v", s, err)
	}
	return *d
}
