package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
)

// parseCap parses a spend cap as the operator types it: an amount in USD
// (zero allowed: nothing may be spent), or "none" for no cap (nil).
func parseCap(flag, s string) (*apd.Decimal, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "none") {
		return nil, nil
	}
	if isZero(s) {
		return apd.New(0, 0), nil // ParseAmount refuses zero; a cap may be
	}
	d, err := billing.ParseAmount(s)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w (or \"none\" for no cap)", flag, err)
	}
	return &d, nil
}

// isZero reports whether s is a plain zero amount: "0", "0.00", "00.0".
func isZero(s string) bool {
	i, f, hasDot := strings.Cut(s, ".")
	return i != "" && strings.Trim(i, "0") == "" && strings.Trim(f, "0") == "" && (!hasDot || f != "")
}

// parseRate parses a per-minute rate limit: a whole number (0 is
// unlimited), or "default" for the server's --rpm/--tpm (nil).
func parseRate(flag, s string) (*int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "default") {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("--%s %q: want a whole number of at least 0 (0 = unlimited), or \"default\"", flag, s)
	}
	return &n, nil
}

// parseAccountRate parses an account's per-minute rate limit: a whole
// number, or "none" (nil). A negative number is left to the store, which
// refuses it as it refuses one from the management API.
func parseAccountRate(flag, s string) (*int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "none") {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: want a whole number, or \"none\"", flag, s)
	}
	return &n, nil
}

// accountRateText renders an account's optional per-minute rate limit.
func accountRateText(n *int64) string {
	if n == nil || *n == 0 {
		return "none"
	}
	return strconv.FormatInt(*n, 10)
}

// capText renders an optional spend cap.
func capText(c *apd.Decimal) string {
	if c == nil {
		return "none"
	}
	return billing.Format(*c)
}

// capJSON renders an optional spend cap for --json: a decimal string or null.
func capJSON(c *apd.Decimal) *string {
	if c == nil {
		return nil
	}
	s := billing.Format(*c)
	return &s
}

// rateText renders an optional per-minute rate limit.
func rateText(n *int64) string {
	switch {
	case n == nil:
		return "default"
	case *n == 0:
		return "unlimited"
	}
	return strconv.FormatInt(*n, 10)
}
