package billing

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// RateLimiter holds a requests-per-minute, a tokens-per-minute and a
// free-bytes-per-minute token bucket per API key. A bucket holds up to a minute's worth (the limit) and
// refills continuously at limit/60 per second; a call takes from it, and a
// call that finds too little is refused with a rate_limited *llm.Error
// (429) carrying the time until enough is back. The token bucket may go below zero (output is only known after
// the call), and later calls wait for it to refill.
//
// Buckets live in memory, per process: a restart forgets them, and they
// hold for one svcgw serve per database. An entry whose buckets are full
// is indistinguishable from no entry, so sweeps drop those, which keeps the
// map to the keys active in the last minute or so. It is safe for
// concurrent use.
//
// A call's path through it: Request before the body is read, AdmitTokens
// with the estimated input before Admission reserves the cost (SpendTokens
// gives the estimate back when the call is refused), and SpendTokens with
// the output once the call is metered. A free call (a token count) takes
// its body's bytes from the free-bytes bucket instead: AdmitFree before
// the body is read, SpendFree once its size is known.
//
// The same limiter holds an account's buckets, across all of its keys,
// when made with NewRateLimiterFor("account") and given account ids for
// key ids.
type RateLimiter struct {
	subject   string // what one entry is, as refusals name it: "key", "account"
	mu        sync.Mutex
	keys      map[string]*keyBuckets
	nextSweep int
	lastSweep time.Time
}

// keyBuckets are one key's buckets.
type keyBuckets struct {
	requests, tokens, free tokenBucket
}

// tokenBucket is a token bucket; limit 0 means the bucket is not in use.
type tokenBucket struct {
	limit  int64 // per minute, which is also the capacity
	level  float64
	filled time.Time // when level was last brought up to date
}

// minSweep is the map size below which sweeps are only time-driven.
const minSweep = 1024

// NewRateLimiter returns a rate limiter of API keys without buckets.
func NewRateLimiter() *RateLimiter { return NewRateLimiterFor("key") }

// NewRateLimiterFor returns a rate limiter without buckets whose entries
// are of subject ("key", "account"), which its refusals name.
func NewRateLimiterFor(subject string) *RateLimiter {
	return &RateLimiter{subject: subject, keys: make(map[string]*keyBuckets), nextSweep: minSweep}
}

// refill brings b up to date at now under limit, which may have changed
// since the last call (a key's limit was edited): the level is then capped
// at the new capacity.
func (b *tokenBucket) refill(limit int64, now time.Time) {
	if b.limit == 0 || b.filled.IsZero() {
		b.limit, b.level, b.filled = limit, float64(limit), now
		return
	}
	b.limit = limit
	if dt := now.Sub(b.filled); dt > 0 {
		b.level += dt.Seconds() * float64(limit) / 60
		b.filled = now
	}
	b.level = math.Min(b.level, float64(limit))
}

// full reports whether b would be back at capacity at now.
func (b *tokenBucket) full(now time.Time) bool {
	if b.limit == 0 {
		return true
	}
	return b.level+now.Sub(b.filled).Seconds()*float64(b.limit)/60 >= float64(b.limit)
}

// wait is how long until b holds need, at its refill rate; at least a
// second, which is the resolution of Retry-After.
func (b *tokenBucket) wait(need float64) time.Duration {
	d := time.Duration((need - b.level) / (float64(b.limit) / 60) * float64(time.Second))
	return max(d.Round(time.Millisecond), time.Second)
}

// entry returns keyID's buckets, creating them. Callers hold rl.mu.
func (rl *RateLimiter) entry(keyID string, now time.Time) *keyBuckets {
	kb := rl.keys[keyID]
	if kb == nil {
		if len(rl.keys) >= rl.nextSweep || now.Sub(rl.lastSweep) > time.Minute {
			rl.sweep(now)
		}
		kb = &keyBuckets{}
		rl.keys[keyID] = kb
	}
	return kb
}

// sweep drops the entries that are full again. Callers hold rl.mu.
func (rl *RateLimiter) sweep(now time.Time) {
	for id, kb := range rl.keys {
		if kb.requests.full(now) && kb.tokens.full(now) && kb.free.full(now) {
			delete(rl.keys, id)
		}
	}
	rl.lastSweep = now
	rl.nextSweep = max(2*len(rl.keys), minSweep)
}

// Request takes one request from the key's requests-per-minute bucket, or
// returns a rate_limited error. limit 0 is unlimited.
func (rl *RateLimiter) Request(keyID string, limit int64, now time.Time) error {
	if limit <= 0 {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := &rl.entry(keyID, now).requests
	b.refill(limit, now)
	if b.level < 1 {
		return rl.requestRefusal(b, limit)
	}
	b.level--
	return nil
}

// requestRefusal is the refusal of a request that b, under limit, does
// not hold.
func (rl *RateLimiter) requestRefusal(b *tokenBucket, limit int64) error {
	wait := b.wait(1)
	return &llm.Error{Kind: llm.KindRateLimited, RetryAfter: wait,
		Message: fmt.Sprintf("rate limit reached: this %s allows %d requests per minute; retry in %s", rl.subject, limit, roundUp(wait))}
}

// AdmitTokens takes a call's estimated input tokens from the key's
// tokens-per-minute bucket, or returns a rate_limited error. A call needs
// the bucket to hold its estimate, or to be full when the estimate is
// larger than a minute's worth; it may then take the bucket below zero.
func (rl *RateLimiter) AdmitTokens(keyID string, limit int64, tokens int, now time.Time) error {
	if limit <= 0 {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := &rl.entry(keyID, now).tokens
	b.refill(limit, now)
	if need := math.Min(float64(tokens), float64(limit)); b.level < need {
		return rl.tokenRefusal(b, limit, tokens, need)
	}
	b.level -= float64(tokens)
	return nil
}

// tokenRefusal is the refusal of a call of tokens (need of them in the
// bucket) that b, under limit, does not admit.
func (rl *RateLimiter) tokenRefusal(b *tokenBucket, limit int64, tokens int, need float64) error {
	wait := b.wait(need)
	return &llm.Error{Kind: llm.KindRateLimited, RetryAfter: wait, Err: llm.ErrTokenRate,
		Message: fmt.Sprintf("rate limit reached: this %s allows %d tokens per minute and this call needs about %d; retry in %s", rl.subject, limit, tokens, roundUp(wait))}
}

// Bucket names one entry's buckets in a RateLimiter, with the limit that
// applies to it now (0: unlimited), for a call counted against two
// limiters at once: a key's and its account's (two entries that are not
// the same).
type Bucket struct {
	Limiter *RateLimiter // nil: none
	ID      string
	Limit   int64
}

// on reports whether b is a bucket in use.
func (b Bucket) on() bool { return b.Limiter != nil && b.Limit > 0 }

// lockBoth locks the limiters of first and second (once when they are
// one), first's first, and returns them for unlockBoth. Callers always
// pass a key's limiter first and an account's second, so two calls never
// lock them in opposite orders.
func lockBoth(first, second Bucket) (a, b *RateLimiter) {
	a = first.Limiter
	a.mu.Lock()
	if second.Limiter != a {
		b = second.Limiter
		b.mu.Lock()
	}
	return a, b
}

func unlockBoth(a, b *RateLimiter) {
	if b != nil {
		b.mu.Unlock()
	}
	a.mu.Unlock()
}

// RequestBoth takes one request from first's and second's
// requests-per-minute buckets, or from neither: when either holds less
// than one, it returns a rate_limited error naming that one (first's when
// both) and its index (0 or 1), having taken nothing from the other. Both
// are checked and taken under both limiters' locks, so no other call sees
// a request taken from one that the other then refused.
func RequestBoth(first, second Bucket, now time.Time) (int, error) {
	switch {
	case !second.on():
		return 0, first.Limiter.request(first, now)
	case !first.on():
		return 1, second.Limiter.Request(second.ID, second.Limit, now)
	}
	defer unlockBoth(lockBoth(first, second))
	var take [2]*tokenBucket
	for i, b := range [2]Bucket{first, second} {
		tb := &b.Limiter.entry(b.ID, now).requests
		tb.refill(b.Limit, now)
		if tb.level < 1 {
			return i, b.Limiter.requestRefusal(tb, b.Limit)
		}
		take[i] = tb
	}
	take[0].level--
	take[1].level--
	return 0, nil
}

// request is Request of b, on a limiter that may be nil when b is not in
// use.
func (rl *RateLimiter) request(b Bucket, now time.Time) error {
	if !b.on() {
		return nil
	}
	return rl.Request(b.ID, b.Limit, now)
}

// AdmitTokensBoth takes a call's estimated input tokens from first's and
// second's tokens-per-minute buckets, or from neither, as RequestBoth
// takes a request; each bucket admits the call as AdmitTokens does.
func AdmitTokensBoth(first, second Bucket, tokens int, now time.Time) (int, error) {
	switch {
	case !second.on():
		if !first.on() {
			return 0, nil
		}
		return 0, first.Limiter.AdmitTokens(first.ID, first.Limit, tokens, now)
	case !first.on():
		return 1, second.Limiter.AdmitTokens(second.ID, second.Limit, tokens, now)
	}
	defer unlockBoth(lockBoth(first, second))
	var take [2]*tokenBucket
	for i, b := range [2]Bucket{first, second} {
		tb := &b.Limiter.entry(b.ID, now).tokens
		tb.refill(b.Limit, now)
		if need := math.Min(float64(tokens), float64(b.Limit)); tb.level < need {
			return i, b.Limiter.tokenRefusal(tb, b.Limit, tokens, need)
		}
		take[i] = tb
	}
	take[0].level -= float64(tokens)
	take[1].level -= float64(tokens)
	return 0, nil
}

// MinFreeBytes is the least a free call takes from the free-bytes bucket,
// however small its body: a flood of tiny counts still costs each its
// request's parsing and authentication.
const MinFreeBytes = 4 << 10

// AdmitFree takes a free call's body bytes from the key's
// free-bytes-per-minute bucket, or returns a rate_limited error: size is
// the body's declared length (Content-Length; -1 when unknown), counted as
// at least MinFreeBytes, and the bucket must hold it, or be full when it
// is larger than a minute's worth; it may then go below zero. It returns
// what it took, for SpendFree. limit 0 is unlimited.
func (rl *RateLimiter) AdmitFree(keyID string, limit int64, size int64, now time.Time) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	take := max(size, MinFreeBytes)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := &rl.entry(keyID, now).free
	b.refill(limit, now)
	need := math.Min(float64(take), float64(limit))
	if b.level < need {
		wait := b.wait(need)
		return 0, &llm.Error{Kind: llm.KindRateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("rate limit reached: this %s may send %s of request bodies a minute to the free endpoints (token counts); retry in %s", rl.subject, byteSize(limit), roundUp(wait))}
	}
	b.level -= float64(take)
	return take, nil
}

// SpendFree settles a free call whose body turned out to be size bytes
// (at least MinFreeBytes) after AdmitFree took took.
func (rl *RateLimiter) SpendFree(keyID string, limit int64, took, size int64, now time.Time) {
	if d := max(size, MinFreeBytes) - took; limit > 0 && d != 0 {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		b := &rl.entry(keyID, now).free
		b.refill(limit, now)
		b.level = math.Min(b.level-float64(d), float64(limit))
	}
}

// byteSize renders n bytes for a message: in MiB or KiB when whole.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// SpendTokens takes tokens from the key's tokens-per-minute bucket without
// checking (output, known after the call), or gives them back when
// negative (a call refused after its input was taken).
func (rl *RateLimiter) SpendTokens(keyID string, limit int64, tokens int, now time.Time) {
	if limit <= 0 || tokens == 0 {
		return
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := &rl.entry(keyID, now).tokens
	b.refill(limit, now)
	b.level = math.Min(b.level-float64(tokens), float64(limit))
}

// roundUp renders a wait as whole seconds, rounded up, as Retry-After
// carries it.
func roundUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}
