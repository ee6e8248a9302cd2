package store

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
)

// toMicros converts a USD amount an operator gave (credits, a cap) to the
// integer micro-dollars of every money column, exactly (money.FromDecimal).
// It fails (ErrInvalid) on NaN, infinity, more than six significant decimal
// places or an int64 overflow.
func toMicros(d apd.Decimal) (int64, error) {
	m, err := money.FromDecimal(d)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return int64(m), nil
}

// fromMicros converts a money column to a USD decimal with exponent -6, so
// it renders with six decimal places.
func fromMicros(v int64) apd.Decimal { return money.Micros(v).Decimal() }

// ms converts t to the stored form: Unix milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis converts a stored time back to a UTC time.Time.
func FromMillis(v int64) time.Time { return time.UnixMilli(v).UTC() }

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
