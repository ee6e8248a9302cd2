// Package money is svcgw's one money type: an amount of US dollars as a
// whole number of micro-dollars (Micros), the precision every amount is
// priced in, stored with and rendered at. A call's cost is a Micros from
// the price table (billing.Prices.CostMicros) to the ledger row (an
// INTEGER column); it becomes text (String) or an apd.Decimal (Decimal,
// FromDecimal) only at the edges: the wire, the CLI, the configuration.
//
// money imports nothing of svcgw's, so that every package that handles
// amounts, the store among them, shares it.
package money

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// Scale is the number of decimal places of an amount: one micro-dollar.
const Scale = 6

// MaxCreditsMicros is the most credit an account may hold in all (every credit
// ever added: its balance plus its total used): nine trillion dollars,
// which leaves the ledger's int64 sums of an account (at most
// 9,223,372,036,854.775807 USD) room for the charges and overdrafts on
// top. The store refuses a credit past it; billing checks it too.
const MaxCreditsMicros = 9_000_000_000_000 * 1_000_000

// Micros is an amount in micro-dollars (millionths of a US dollar):
// 1500000 is 1.500000.
type Micros int64

// String renders m with exactly six decimal places, as every amount
// appears in the API, the CLI and the logs: "0.000123", "-2.500000".
func (m Micros) String() string {
	var b [24]byte // "-9223372036854.775808"
	i := len(b)
	u := uint64(m)
	if m < 0 {
		u = -u
	}
	for d := 0; d < Scale || u > 0 || d == Scale; d++ {
		if d == Scale {
			i--
			b[i] = '.'
		}
		i--
		b[i] = byte('0' + u%10)
		u /= 10
	}
	if m < 0 {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Decimal is m as a decimal with exponent -6, so that it renders with six
// decimal places.
func (m Micros) Decimal() apd.Decimal {
	return *apd.New(int64(m), -Scale)
}

// ErrInexact is the error of an amount FromDecimal cannot hold exactly.
var ErrInexact = errors.New("not a whole number of micro-dollars")

// FromDecimal is the amount d, exactly. It fails (ErrInexact) on NaN,
// infinity, more than six significant decimal places (trailing zeros are
// fine: 1.5000000 is 1500000) or an amount beyond an int64 of
// micro-dollars. An amount to be rounded is billing's (billing.ToMicros).
func FromDecimal(d apd.Decimal) (Micros, error) {
	if d.Form != apd.Finite {
		return 0, fmt.Errorf("amount %s: %w: not a finite number", d.String(), ErrInexact)
	}
	if d.Exponent > apd.MaxExponent-Scale {
		return 0, fmt.Errorf("amount %s: %w: out of range", d.String(), ErrInexact)
	}
	// Scaling by 10^6 is an exponent shift, which is exact; Int64 then
	// refuses a fractional part or a value outside int64.
	var m apd.Decimal
	m.Set(&d)
	m.Exponent += Scale
	v, err := m.Int64()
	if err != nil {
		return 0, fmt.Errorf("amount %s: %w: need at most six decimal places within range", d.String(), ErrInexact)
	}
	return Micros(v), nil
}
