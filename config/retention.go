package config

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Retention says how long svcgw keeps detail it does not need for money:
// usage roll-ups, credits and balances are kept forever whatever it says.
type Retention struct {
	// Generations is how long a generation row (the record /generation
	// returns, with its feedback) is kept; 0 keeps every one forever.
	Generations time.Duration
}

// MinRetention is the shortest retention accepted: anything shorter is
// much more likely a missing unit than a wish.
const MinRetention = 24 * time.Hour

// ParseRetention parses a retention period: a number of days such as
// "90d", a Go duration of at least a day such as "2160h", or "0" to keep
// everything.
func ParseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil || n <= 0 {
			return 0, errRetention
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, errRetention
		}
	}
	if d < MinRetention {
		return 0, errRetention
	}
	return d, nil
}

var errRetention = errors.New(`must be a number of days such as 90d, or a duration of at least 24h; 0 keeps everything`)

// fileRetention is the retention section as written.
type fileRetention struct {
	Generations string `yaml:"generations"`
}

// loadRetention validates the retention section: fr as decoded, sec for
// the lines its errors point at.
func loadRetention(fr fileRetention, sec entry) (Retention, Errors) {
	if fr.Generations == "" {
		return Retention{}, nil
	}
	d, err := ParseRetention(fr.Generations)
	if err != nil {
		var errs Errors
		errs.addf(sec.get("generations").line(), "retention.generations: %v", err)
		return Retention{}, errs
	}
	return Retention{Generations: d}, nil
}
