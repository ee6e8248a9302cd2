package billing

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

func retryAfter(t *testing.T, err error) time.Duration {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindRateLimited {
		t.Fatalf("want rate_limited, got %v", err)
	}
	return e.RetryAfter
}

func TestRateLimiter_Requests(t *testing.T) {
	is := is.New(t)
	rl := NewRateLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 6 {
		is.NoErr(rl.Request("k", 6, now)) // a minute's worth at once
	}
	is.Equal(retryAfter(t, rl.Request("k", 6, now)), 10*time.Second) // one request per 10s
	is.NoErr(rl.Request("other", 6, now))                            // per key
	is.NoErr(rl.Request("k", 0, now))                                // 0 is unlimited
	now = now.Add(10 * time.Second)
	is.NoErr(rl.Request("k", 6, now)) // refilled one
	is.True(rl.Request("k", 6, now) != nil)

	// Lowering the limit caps what the bucket holds.
	now = now.Add(time.Hour)
	is.NoErr(rl.Request("k", 1, now))
	is.Equal(retryAfter(t, rl.Request("k", 1, now)), time.Minute)
	is.Equal(retryAfter(t, rl.Request("k", 120, now.Add(-time.Second))), time.Second) // at least a second
}

// A request needs a whole one in the bucket: part of one refilled is not
// enough, and the wait is for the rest of it.
func TestRateLimiter_RequestNeedsAWholeOne(t *testing.T) {
	is := is.New(t)
	rl := NewRateLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	is.NoErr(rl.Request("k", 6, now.Add(-10*time.Second))) // 5 left, and 10 s later one more
	for range 6 {
		is.NoErr(rl.Request("k", 6, now)) // 0 left
	}
	for _, tc := range []struct {
		after time.Duration
		left  time.Duration
	}{
		{time.Second, 9 * time.Second},         // 0.1 of one
		{5 * time.Second, 5 * time.Second},     // half of one
		{9900 * time.Millisecond, time.Second}, // 0.99 of one: the wait is at least a second
		{9 * time.Second, time.Second},         // 0.9
	} {
		is.Equal(retryAfter(t, rl.Request("k", 6, now.Add(tc.after))), tc.left) // refused until a whole one is back
	}
	is.NoErr(rl.Request("k", 6, now.Add(10*time.Second))) // a whole one
}

func TestRateLimiter_Tokens(t *testing.T) {
	is := is.New(t)
	rl := NewRateLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	is.NoErr(rl.AdmitTokens("k", 600, 100, now)) // 500 left
	rl.SpendTokens("k", 600, 900, now)           // output: -400
	wait := retryAfter(t, rl.AdmitTokens("k", 600, 100, now))
	is.Equal(wait, 50*time.Second) // 500 tokens at 10 a second
	is.NoErr(rl.AdmitTokens("k", 600, 100, now.Add(wait)))

	// An estimate above a minute's worth waits for a full bucket, then may
	// take it far below zero.
	now = now.Add(time.Hour)
	is.NoErr(rl.AdmitTokens("big", 600, 5000, now))
	is.Equal(retryAfter(t, rl.AdmitTokens("big", 600, 1, now)), 440100*time.Millisecond) // back to 1 from -4400

	// A refused call gives its estimate back, never above capacity.
	is.NoErr(rl.AdmitTokens("r", 600, 600, now))
	rl.SpendTokens("r", 600, -600, now)
	rl.SpendTokens("r", 600, -600, now)
	is.NoErr(rl.AdmitTokens("r", 600, 600, now))
	is.True(rl.AdmitTokens("r", 600, 1, now) != nil) // full was 600, not 1200
}

func TestRateLimiter_SweepsOnlyFullBuckets(t *testing.T) {
	is := is.New(t)
	rl := NewRateLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 * minSweep {
		is.NoErr(rl.Request("k"+strconv.Itoa(i), 60, now))
	}
	is.Equal(len(rl.keys), 3*minSweep) // none full yet: nothing to drop
	now = now.Add(2 * time.Second)     // every bucket has refilled
	is.NoErr(rl.Request("busy", 60, now))
	is.NoErr(rl.Request("newcomer", 60, now.Add(2*time.Minute)))
	is.Equal(len(rl.keys), 1) // every refilled entry is gone; only the newcomer's is left
	_, ok := rl.keys["newcomer"]
	is.True(ok)
}

func TestRateLimiter_FreeBytes(t *testing.T) {
	is := is.New(t)
	rl := NewRateLimiter()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const limit = 60 << 10 // 60 KiB a minute: 1 KiB a second

	took, err := rl.AdmitFree("k", limit, 40<<10, now)
	is.NoErr(err)
	is.Equal(took, int64(40<<10)) // the declared length
	_, err = rl.AdmitFree("k", limit, 40<<10, now)
	is.Equal(retryAfter(t, err), 20*time.Second) // 20 KiB left: 20 s until 40
	took, err = rl.AdmitFree("k", limit, -1, now)
	is.NoErr(err)
	is.Equal(took, int64(MinFreeBytes))         // unknown length: the minimum for now
	rl.SpendFree("k", limit, took, 16<<10, now) // it was 16 KiB: 4 KiB left
	_, err = rl.AdmitFree("k", limit, 5<<10, now)
	is.Equal(retryAfter(t, err), time.Second) // 4 KiB left, 5 needed
	_, err = rl.AdmitFree("k", limit, 100, now)
	is.NoErr(err) // a tiny body counts as 4 KiB, which fits: 0 left
	_, err = rl.AdmitFree("k", limit, 100, now)
	is.Equal(retryAfter(t, err), 4*time.Second) // 4 KiB at 1 KiB a second
	_, err = rl.AdmitFree("other", limit, 100, now)
	is.NoErr(err) // per key

	// A body larger than a minute's worth needs a full bucket, and takes
	// it below zero.
	_, err = rl.AdmitFree("big", limit, 120<<10, now)
	is.NoErr(err)
	_, err = rl.AdmitFree("big", limit, 100, now)
	is.Equal(retryAfter(t, err), 64*time.Second) // from -60 KiB back to 4
	took, err = rl.AdmitFree("off", 0, 1<<30, now)
	is.NoErr(err) // 0 is unlimited
	is.Equal(took, int64(0))

	// A body that turned out smaller gives the difference back.
	took, err = rl.AdmitFree("back", limit, 60<<10, now)
	is.NoErr(err)
	rl.SpendFree("back", limit, took, 10<<10, now)
	_, err = rl.AdmitFree("back", limit, 50<<10, now)
	is.NoErr(err) // 50 KiB were given back
}

// A call counted against a key and its account takes from both or from
// neither: the account's refusal leaves the key's requests and tokens
// whole, and the key's leaves the account's.
func TestRateLimiter_BothOrNeither(t *testing.T) {
	is := is.New(t)
	keys, accounts := NewRateLimiter(), NewRateLimiterFor("account")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := Bucket{keys, "k", 4}
	acct := Bucket{accounts, "a", 2}
	for range 2 {
		which, err := RequestBoth(key, acct, now)
		is.NoErr(err)
		is.Equal(which, 0)
	}
	for range 5 {
		which, err := RequestBoth(key, acct, now)
		is.Equal(which, 1) // the account refuses
		is.Equal(retryAfter(t, err), 30*time.Second)
		is.True(strings.Contains(err.Error(), "this account allows 2 requests per minute"))
	}
	for range 2 {
		is.NoErr(keys.Request("k", 4, now)) // the key's third and fourth: nothing was taken by the refusals
	}
	which, err := RequestBoth(key, Bucket{}, now)
	is.Equal(which, 0) // now the key refuses
	is.True(strings.Contains(err.Error(), "this key allows 4 requests per minute"))
	which, err = RequestBoth(key, Bucket{accounts, "b", 2}, now)
	is.Equal(which, 0) // the key refuses first ...
	is.True(err != nil)
	for range 2 {
		is.NoErr(accounts.Request("b", 2, now)) // ... and the account's bucket is whole
	}

	// Tokens alike: the account's 10 a minute refuse a call of 8 after one
	// of 5; the key's 100 lose nothing to the refusal.
	tkey, tacct := Bucket{keys, "k", 100}, Bucket{accounts, "a", 10}
	_, err = AdmitTokensBoth(tkey, tacct, 5, now)
	is.NoErr(err)
	which, err = AdmitTokensBoth(tkey, tacct, 8, now)
	is.Equal(which, 1)
	is.True(errors.Is(err, llm.ErrTokenRate))
	is.NoErr(keys.AdmitTokens("k", 100, 95, now)) // 100 − 5: the refused 8 were not taken
	is.True(keys.AdmitTokens("k", 100, 1, now) != nil)
}

// A limiter given as both buckets is locked once (no self-deadlock).
func TestRateLimiter_BothOnOneLimiter(t *testing.T) {
	is := is.New(t)
	rl := NewRateLimiter()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := RequestBoth(Bucket{rl, "x", 1}, Bucket{rl, "y", 1}, now)
	is.NoErr(err)
	which, err := RequestBoth(Bucket{rl, "z", 1}, Bucket{rl, "y", 1}, now)
	is.Equal(which, 1)
	is.True(err != nil)
	is.NoErr(rl.Request("z", 1, now)) // untouched by the refusal
}

// BenchmarkRateLimiter_Request is one call's request taken from its key's
// bucket alone, and with its account's (RequestBoth).
func BenchmarkRateLimiter_Request(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keys, accounts := NewRateLimiter(), NewRateLimiterFor("account")
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			_ = keys.Request("k", 1<<40, now)
		}
	})
	b.Run("key+account", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			_, _ = RequestBoth(Bucket{keys, "k", 1 << 40}, Bucket{accounts, "a", 1 << 40}, now)
		}
	})
}
