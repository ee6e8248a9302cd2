package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// testClock is a settable clock whose Sleep records waits instead of waiting.
type testClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newRetryRouter(clock *testClock, def ...upstream.Candidate) *upstream.Router {
	return upstream.NewRouterWithOptions(upstream.RouterOptions{
		MaxRetries: 2, BaseBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
		BreakerThreshold: 3, BreakerCooldown: 30 * time.Second,
		Now: clock.Now, Sleep: clock.Sleep,
	}, def)
}

// flaky fails its first n calls with err, then answers.
func flaky(n int, err error) *fakeBackend {
	ok := answering("recovered")
	b := &fakeBackend{}
	var mu sync.Mutex
	calls := 0
	fail := func() bool {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return calls <= n
	}
	b.CompleteFn = func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if fail() {
			return nil, err
		}
		return ok.CompleteFn(ctx, req)
	}
	b.StreamFn = func(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
		if fail() {
			return nil, err
		}
		return ok.StreamFn(ctx, req)
	}
	return b
}

var hello = &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}

func TestRouter_RetriesTransientFailuresWithBackoff(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"connection error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}},
		{"429", &llm.Error{Kind: llm.KindRateLimited, Message: "slow down"}},
		{"5xx", &llm.Error{Kind: llm.KindUpstream, Message: "upstream failed"}},
		{"overloaded", &llm.Error{Kind: llm.KindOverloaded, Message: "overloaded"}},
		{"timeout", &llm.Error{Kind: llm.KindTimeout, Message: "timed out"}},
		// What the protocol backends make of a plain HTTP 500 reply.
		{"a plain 500 reply", upstream.ErrorFromStatus(http.StatusInternalServerError, http.Header{}, []byte(`{"error":"internal"}`), upstream.ErrorHint{})},
		{"a 502 reply", upstream.ErrorFromStatus(http.StatusBadGateway, http.Header{}, []byte("bad gateway"), upstream.ErrorHint{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			clock := &testClock{now: time.Unix(0, 0)}
			b := flaky(2, tc.err)
			r := newRetryRouter(clock, cand("a", b))
			resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
			is.NoErr(err)                                                                             // recovered after two retries
			is.Equal(resp.Text(), "recovered")                                                        // from the same candidate
			is.Equal(b.calls.Load(), int32(3))                                                        // 1 + 2 retries
			is.Equal(len(clock.waits), 2)                                                             // two backoffs
			is.True(clock.waits[0] >= 50*time.Millisecond && clock.waits[0] <= 150*time.Millisecond)  // 100ms ±50%
			is.True(clock.waits[1] >= 100*time.Millisecond && clock.waits[1] <= 300*time.Millisecond) // doubled
		})
	}
}

// A candidate that keeps failing is tried 1 + MaxRetries times, with a
// backoff before each retry, and then the next one answers. (The breaker's
// threshold is out of reach here, so that it is the retry count, not the
// breaker, that stops the retries.)
func TestRouter_RetriesAtMostMaxRetries(t *testing.T) {
	for _, retries := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("MaxRetries %d", retries), func(t *testing.T) {
			is := is.New(t)
			clock := &testClock{now: time.Unix(0, 0)}
			down := failing(upstream.ErrorFromStatus(http.StatusInternalServerError, http.Header{}, nil, upstream.ErrorHint{}))
			r := upstream.NewRouterWithOptions(upstream.RouterOptions{
				MaxRetries: retries, BaseBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
				BreakerThreshold: 1000, BreakerCooldown: 30 * time.Second,
				Now: clock.Now, Sleep: clock.Sleep,
			}, []upstream.Candidate{cand("a", down), cand("b", answering("from b"))})
			resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
			is.NoErr(err)
			is.Equal(resp.Text(), "from b")               // then the next candidate
			is.Equal(down.calls.Load(), int32(1+retries)) // 1 + MaxRetries, not one more
			is.Equal(len(clock.waits), retries)           // a backoff before each retry
		})
	}
}

func TestRouter_HonoursShortRetryAfter(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	b := flaky(1, &llm.Error{Kind: llm.KindRateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond})
	r := newRetryRouter(clock, cand("a", b))
	_, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err)
	is.Equal(clock.waits, []time.Duration{1500 * time.Millisecond}) // the upstream's own wait
}

func TestRouter_LongRetryAfterFallsBackAtOnce(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	limited := failing(&llm.Error{Kind: llm.KindRateLimited, Message: "quota", RetryAfter: time.Minute})
	r := newRetryRouter(clock, cand("a", limited), cand("b", answering("from b")))
	resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err)
	is.Equal(resp.Text(), "from b")
	is.Equal(limited.calls.Load(), int32(1)) // not retried
	is.Equal(len(clock.waits), 0)            // nobody waited a minute
}

func TestRouter_NoRetryForRejectedCredentialsButFallBack(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	creds := failing(&llm.Error{Kind: llm.KindUpstream, Message: "the gateway's upstream credentials were rejected",
		Err: &upstream.StatusError{StatusCode: 401}})
	r := newRetryRouter(clock, cand("a", creds), cand("b", answering("from b")))
	resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err)
	is.Equal(resp.Text(), "from b")
	is.Equal(creds.calls.Load(), int32(1)) // not retried: waiting cannot fix a bad key
}

func TestRouter_NoRetryForCallerFaults(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	bad := failing(&llm.Error{Kind: llm.KindInvalidRequest, Message: "bad"})
	other := answering("b")
	r := newRetryRouter(clock, cand("a", bad), cand("b", other))
	_, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.True(err != nil)
	is.Equal(bad.calls.Load(), int32(1))   // not retried
	is.Equal(other.calls.Load(), int32(0)) // no fallback
}

func TestRouter_StreamRetriesOnlyBeforeTheFirstEvent(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	b := flaky(1, &llm.Error{Kind: llm.KindOverloaded, Message: "busy"})
	r := newRetryRouter(clock, cand("a", b))
	s, _, err := r.Stream(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err) // retried before the first event
	defer s.Close()
	is.True(s.Next())
	is.Equal(s.Event().Text, "recovered")

	// A failure after the first event is the caller's to see, not retried.
	mid := failing(&llm.Error{Kind: llm.KindUpstream, Message: "broke"}, llm.Event{Type: llm.EventTextDelta, Text: "partial"})
	r = newRetryRouter(clock, cand("m", mid), cand("n", answering("never")))
	s, _, err = r.Stream(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err)
	is.True(s.Next())
	is.True(!s.Next())
	is.True(s.Err() != nil)              // surfaced mid-stream
	is.Equal(mid.calls.Load(), int32(1)) // committed to the first backend
}

func TestRouter_CircuitBreaker(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	down := failing(&llm.Error{Kind: llm.KindUpstream, Message: "down"})
	up := answering("from b")
	r := newRetryRouter(clock, cand("a", down), cand("b", up))

	// First call: a fails 3 times (1 + 2 retries) → breaker opens; b answers.
	resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err)
	is.Equal(resp.Text(), "from b")
	is.Equal(down.calls.Load(), int32(3))

	// While open, a is skipped entirely.
	for i := 0; i < 5; i++ {
		_, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
		is.NoErr(err)
	}
	is.Equal(down.calls.Load(), int32(3)) // not called while open

	// After the cooldown one call probes a (half open); it fails and the
	// breaker opens again without retries.
	clock.Advance(31 * time.Second)
	_, _, err = r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.NoErr(err)
	is.Equal(down.calls.Load(), int32(4)) // one probe, no retries
	_, _, _ = r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.Equal(down.calls.Load(), int32(4)) // open again

	// When every candidate is open, the route still tries them.
	onlyDown := failing(&llm.Error{Kind: llm.KindUpstream, Message: "down"})
	r = newRetryRouter(clock, cand("x", onlyDown))
	for i := 0; i < 3; i++ {
		_, _, _ = r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	}
	before := onlyDown.calls.Load()
	_, _, err = r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	is.True(err != nil)
	is.True(onlyDown.calls.Load() > before) // tried despite the open breaker
}

func TestRouter_CacheAffinityAmongEquals(t *testing.T) {
	is := is.New(t)
	clock := &testClock{now: time.Unix(0, 0)}
	backends := map[string]*fakeBackend{}
	var cands []upstream.Candidate
	for _, name := range []string{"e1", "e2", "e3", "e4"} {
		b := answering(name)
		backends[name] = b
		cands = append(cands, upstream.Candidate{Name: name, Backend: b, Group: "equals"})
	}
	r := newRetryRouter(clock, cands...)
	call := func(system, user string) string {
		req := &llm.Request{Model: "m", System: []llm.Part{{Type: llm.PartText, Text: system, CacheControl: &llm.CacheControl{TTL: "5m"}}},
			Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(user)}}}}
		resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, req)
		is.NoErr(err)
		return resp.Text()
	}
	// The same cacheable prefix always lands on the same backend, whatever
	// follows the breakpoint.
	for p := 0; p < 20; p++ {
		system := fmt.Sprintf("system prompt %d", p)
		first := call(system, "question 1")
		for q := 2; q < 6; q++ {
			is.Equal(call(system, fmt.Sprintf("question %d", q)), first) // sticky
		}
	}
	// Different prefixes spread over the group.
	used := 0
	for _, b := range backends {
		if b.calls.Load() > 0 {
			used++
		}
	}
	is.True(used >= 3) // 20 prefixes over 4 equals
}
