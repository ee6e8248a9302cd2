package upstream

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestRetryAfter(t *testing.T) {
	is := is.New(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(kv ...string) map[string][]string {
		m := map[string][]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = []string{kv[i+1]}
		}
		return m
	}
	is.Equal(retryAfter(h("Retry-After", "Thu, 01 Jan 2026 00:00:30 GMT"), now), 30*time.Second)
	is.Equal(retryAfter(h("Retry-After", "0.5"), now), 500*time.Millisecond)
	is.Equal(retryAfter(h("Retry-After", "soon"), now), time.Duration(0))
	is.Equal(retryAfter(h("Retry-After", "-3"), now), time.Duration(0))
	is.Equal(retryAfter(h("Retry-After-Ms", "250", "Retry-After", "9"), now), 250*time.Millisecond)
	is.Equal(retryAfter(nil, now), time.Duration(0))
}
