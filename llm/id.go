package llm

import (
	"crypto/rand"
	"time"
)

// idAlphabet is base62 in ASCII order, so ids with a fixed-width time
// prefix sort by creation.
const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// idTimeChars is the width of an id's time prefix: milliseconds since the
// Unix epoch in 8 base62 digits, enough for about 6,900 years.
const idTimeChars = 8

// NewID returns a gateway-issued id: prefix, then n base62 characters, the
// first 8 of which encode the current time in milliseconds and the rest
// come from crypto/rand (uniformly: biased bytes are rejected). Ids sort by
// creation, which keeps the ledger's primary-key index appending instead of
// writing all over itself; with n = 24 they carry 95 random bits.
func NewID(prefix string, n int) string {
	return newIDAt(prefix, n, time.Now())
}

func newIDAt(prefix string, n int, now time.Time) string {
	out := make([]byte, len(prefix)+max(n, idTimeChars))
	copy(out, prefix)
	body := out[len(prefix):]
	ms := uint64(max(now.UnixMilli(), 0))
	for i := idTimeChars - 1; i >= 0; i-- {
		body[i] = idAlphabet[ms%62]
		ms /= 62
	}
	rest := body[idTimeChars:]
	var buf [32]byte
	for filled := 0; filled < len(rest); {
		_, _ = rand.Read(buf[:]) // never fails: crypto/rand panics instead
		for _, b := range buf {
			// 248 = 4·62: rejecting larger bytes keeps every character
			// equally likely.
			if b < 248 && filled < len(rest) {
				rest[filled] = idAlphabet[b%62]
				filled++
			}
		}
	}
	return string(out)
}
