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

// NewIDAt is NewID for an id made at now: for programs that write
// generations of the past (the benchmark's seeder) and for tests.
func NewIDAt(prefix string, n int, now time.Time) string {
	return newIDAt(prefix, n, now)
}

// IDTime returns the time encoded in an id made by NewID with prefix (its
// first 8 characters after the prefix, in milliseconds). ok is false when
// id does not start with prefix followed by 8 base62 digits.
func IDTime(id, prefix string) (t time.Time, ok bool) {
	if len(id) < len(prefix)+idTimeChars || id[:len(prefix)] != prefix {
		return time.Time{}, false
	}
	var ms uint64
	for _, c := range []byte(id[len(prefix) : len(prefix)+idTimeChars]) {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'A' <= c && c <= 'Z':
			d = c - 'A' + 10
		case 'a' <= c && c <= 'z':
			d = c - 'a' + 36
		default:
			return time.Time{}, false
		}
		ms = ms*62 + uint64(d)
	}
	return time.UnixMilli(int64(ms)).UTC(), true
}
