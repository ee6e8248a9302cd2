package server

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Default request bounds (see Bounds).
const (
	DefaultMaxMessages    = 10000
	DefaultMaxParts       = 1000
	DefaultMaxTools       = 512
	DefaultMaxSchemaBytes = 256 << 10
)

// Bounds limit the shape of a decoded inference request. A request beyond
// one is refused with 400 invalid_request naming the bound and the field,
// in the caller's native envelope. Only the body size (Options.MaxBodyBytes)
// is a 413: it is the one limit met before the request is understood, and
// the other bounds are about what the request says rather than how many
// bytes it took to say it. A zero field takes its default.
type Bounds struct {
	// MaxMessages bounds the conversation turns (messages, contents,
	// input items); default 10,000.
	MaxMessages int
	// MaxParts bounds the content parts of one message, of the system
	// prompt and of one tool result; default 1,000.
	MaxParts int
	// MaxTools bounds the tool (function) definitions; default 512.
	MaxTools int
	// MaxSchemaBytes bounds each JSON Schema: every tool's parameters and
	// the response schema; default 256 KiB.
	MaxSchemaBytes int
}

func (b Bounds) withDefaults() Bounds {
	if b.MaxMessages <= 0 {
		b.MaxMessages = DefaultMaxMessages
	}
	if b.MaxParts <= 0 {
		b.MaxParts = DefaultMaxParts
	}
	if b.MaxTools <= 0 {
		b.MaxTools = DefaultMaxTools
	}
	if b.MaxSchemaBytes <= 0 {
		b.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	return b
}

// check returns an invalid_request error for the first bound req exceeds,
// naming the caller's field (f, the surface's words for the fields).
func (b Bounds) check(f surface.Fields, req *llm.Request) error {
	if n := len(req.Messages); n > b.MaxMessages {
		return llm.InvalidParam(f.Messages, "the request has %d messages; the limit is %d", n, b.MaxMessages)
	}
	if n := len(req.Tools); n > b.MaxTools {
		return llm.InvalidParam(f.Tools, "the request defines %d tools; the limit is %d", n, b.MaxTools)
	}
	if n := len(req.System); n > b.MaxParts {
		return llm.InvalidParam(f.System, "the system prompt has %d content parts; the limit is %d", n, b.MaxParts)
	}
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		if len(parts) > b.MaxParts {
			if turns := req.Messages[i].Turns; turns > 1 {
				return llm.InvalidParam(f.Messages, "%d consecutive %s of one role hold %d content parts between them; "+
					"consecutive %s of one role count as one turn, and the limit is %d content parts per turn",
					turns, f.Turn, len(parts), f.Turn, b.MaxParts)
			}
			return llm.InvalidParam(f.Messages, "a message has %d content parts; the limit is %d per message", len(parts), b.MaxParts)
		}
		for j := range parts {
			if tr := parts[j].ToolResult; tr != nil && len(tr.Content) > b.MaxParts {
				return llm.InvalidParam(f.Messages, "a tool result has %d content parts; the limit is %d", len(tr.Content), b.MaxParts)
			}
		}
	}
	for i := range req.Tools {
		if n := len(req.Tools[i].Parameters); n > b.MaxSchemaBytes {
			return llm.InvalidParam(f.Tools, "the parameter schema of tool %q is %d bytes; the limit is %d bytes per schema", req.Tools[i].Name, n, b.MaxSchemaBytes)
		}
	}
	if rf := req.ResponseFormat; rf != nil && len(rf.Schema) > b.MaxSchemaBytes {
		return llm.InvalidParam(f.Schema, "the response schema is %d bytes; the limit is %d bytes", len(rf.Schema), b.MaxSchemaBytes)
	}
	return nil
}

// rateLimiter holds a requests-per-minute and a tokens-per-minute token
// bucket per API key. A bucket holds up to a minute's worth (the limit) and
// refills continuously at limit/60 per second; a call takes from it, and a
// call that finds too little is refused with 429 and the time until enough
// is back. The token bucket may go below zero (output is only known after
// the call), and later calls wait for it to refill.
//
// Buckets live in memory, per process: a restart forgets them, and they
// hold for one svcgw serve per database. An entry whose buckets are full
// is indistinguishable from no entry, so sweeps drop those, which keeps the
// map to the keys active in the last minute or so.
type rateLimiter struct {
	mu        sync.Mutex
	keys      map[string]*keyBuckets
	nextSweep int
	lastSweep time.Time
}

// keyBuckets are one key's buckets.
type keyBuckets struct {
	requests, tokens tokenBucket
}

// tokenBucket is a token bucket; limit 0 means the bucket is not in use.
type tokenBucket struct {
	limit  int64 // per minute, which is also the capacity
	level  float64
	filled time.Time // when level was last brought up to date
}

// minSweep is the map size below which sweeps are only time-driven.
const minSweep = 1024

func newRateLimiter() *rateLimiter {
	return &rateLimiter{keys: make(map[string]*keyBuckets), nextSweep: minSweep}
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
func (rl *rateLimiter) entry(keyID string, now time.Time) *keyBuckets {
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
func (rl *rateLimiter) sweep(now time.Time) {
	for id, kb := range rl.keys {
		if kb.requests.full(now) && kb.tokens.full(now) {
			delete(rl.keys, id)
		}
	}
	rl.lastSweep = now
	rl.nextSweep = max(2*len(rl.keys), minSweep)
}

// request takes one request from the key's requests-per-minute bucket, or
// returns a rate_limited error. limit 0 is unlimited.
func (rl *rateLimiter) request(keyID string, limit int64, now time.Time) error {
	if limit <= 0 {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := &rl.entry(keyID, now).requests
	b.refill(limit, now)
	if b.level < 1 {
		wait := b.wait(1)
		return &llm.Error{Kind: llm.KindRateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("rate limit reached: this key allows %d requests per minute; retry in %s", limit, roundUp(wait))}
	}
	b.level--
	return nil
}

// admitTokens takes a call's estimated input tokens from the key's
// tokens-per-minute bucket, or returns a rate_limited error. A call needs
// the bucket to hold its estimate, or to be full when the estimate is
// larger than a minute's worth; it may then take the bucket below zero.
func (rl *rateLimiter) admitTokens(keyID string, limit int64, tokens int, now time.Time) error {
	if limit <= 0 {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := &rl.entry(keyID, now).tokens
	b.refill(limit, now)
	need := math.Min(float64(tokens), float64(limit))
	if b.level < need {
		wait := b.wait(need)
		return &llm.Error{Kind: llm.KindRateLimited, RetryAfter: wait, Err: llm.ErrTokenRate,
			Message: fmt.Sprintf("rate limit reached: this key allows %d tokens per minute and this call needs about %d; retry in %s", limit, tokens, roundUp(wait))}
	}
	b.level -= float64(tokens)
	return nil
}

// spendTokens takes tokens from the key's tokens-per-minute bucket without
// checking (output, known after the call), or gives them back when
// negative (a call refused after its input was taken).
func (rl *rateLimiter) spendTokens(keyID string, limit int64, tokens int, now time.Time) {
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
