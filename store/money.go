package store

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
)

// microsExponent is the scale of every money column: six decimal places.
const microsExponent = 6

// toMicros converts a USD amount to integer micro-dollars, exactly. It fails
// (ErrInvalid) on NaN, infinity, more than six significant decimal places
// (trailing zeros are fine: 1.5000000 is 1500000) or an int64 overflow.
func toMicros(d apd.Decimal) (int64, error) {
	if d.Form != apd.Finite {
		return 0, fmt.Errorf("amount %s: %w: not a finite number", d.String(), ErrInvalid)
	}
	if d.Exponent > apd.MaxExponent-microsExponent {
		return 0, fmt.Errorf("amount %s: %w: out of range", d.String(), ErrInvalid)
	}
	// Scaling by 10^6 is an exponent shift, which is exact; Int64 then
	// refuses a fractional part or a value outside int64.
	var m apd.Decimal
	m.Set(&d)
	m.Exponent += microsExponent
	v, err := m.Int64()
	if err != nil {
		return 0, fmt.Errorf("amount %s: %w: need at most six decimal places within range", d.String(), ErrInvalid)
	}
	return v, nil
}

// fromMicros converts micro-dollars to a USD decimal with exponent -6, so it
// renders with six decimal places.
func fromMicros(v int64) apd.Decimal {
	return *apd.New(v, -microsExponent)
}

// ms converts t to the stored form: Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts a stored time back to a UTC time.Time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// maxNameLen bounds account names and key labels, in bytes.
const maxNameLen = 128

// checkName validates an account name or key label: non-empty valid UTF-8,
// at most maxNameLen bytes, no control characters and no surrounding spaces.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: %w: empty", what, ErrInvalid)
	case len(name) > maxNameLen:
		return fmt.Errorf("%s: %w: longer than %d bytes", what, ErrInvalid, maxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s: %w: not UTF-8", what, ErrInvalid)
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return fmt.Errorf("%s %q: %w: surrounding space", what, name, ErrInvalid)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s %q: %w: control character", what, name, ErrInvalid)
		}
	}
	return nil
}
