package upstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// recordingTracer records what the router tells a Tracer, and marks each
// attempt's context so the test can see the backend got it.
type recordingTracer struct {
	mu     sync.Mutex
	starts []string // candidate name, attempt number, retry
	ends   []upstream.Attempt
}

type attemptKey struct{}

func (rt *recordingTracer) StartAttempt(ctx context.Context, c *upstream.Candidate, n int, retry bool, _ upstream.Operation) context.Context {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	kind := "first"
	switch {
	case retry:
		kind = "retry"
	case n > 0:
		kind = "fallback"
	}
	rt.starts = append(rt.starts, c.Name+":"+kind)
	return context.WithValue(ctx, attemptKey{}, n)
}

func (rt *recordingTracer) EndAttempt(ctx context.Context, a *upstream.Attempt) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := ctx.Value(attemptKey{}).(int); !ok {
		panic("EndAttempt without the attempt's context")
	}
	rt.ends = append(rt.ends, *a)
}

// TestRouter_TracerSeesEveryAttempt: each attempt, retries and fallbacks
// included, is started and ended on the Tracer, and runs with the context
// the Tracer gave it.
func TestRouter_TracerSeesEveryAttempt(t *testing.T) {
	for _, stream := range []bool{false, true} {
		rt := &recordingTracer{}
		clock := &testClock{now: time.Unix(0, 0)}
		bad := flaky(100, &llm.Error{Kind: llm.KindOverloaded, Message: "busy"})
		good := answering("ok")
		var seen []int
		var mu sync.Mutex
		note := func(ctx context.Context) {
			mu.Lock()
			defer mu.Unlock()
			n, _ := ctx.Value(attemptKey{}).(int)
			seen = append(seen, n)
		}
		wrap := func(b *fakeBackend) *fakeBackend {
			c, s := b.CompleteFn, b.StreamFn
			b.CompleteFn = func(ctx context.Context, req *llm.Request) (*llm.Response, error) { note(ctx); return c(ctx, req) }
			b.StreamFn = func(ctx context.Context, req *llm.Request) (upstream.Stream, error) { note(ctx); return s(ctx, req) }
			return b
		}
		r := upstream.NewRouterWithOptions(upstream.RouterOptions{
			MaxRetries: 1, BreakerThreshold: 100, Now: clock.Now, Sleep: clock.Sleep, Tracer: rt,
		}, []upstream.Candidate{cand("bad", wrap(bad)), cand("good", wrap(good))})
		var err error
		if stream {
			var st upstream.Stream
			st, _, err = r.Stream(context.Background(), llm.TypePro, llm.TierMedium, hello)
			if err == nil {
				st.Close()
			}
		} else {
			_, _, err = r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"bad:first", "bad:retry", "good:fallback"}
		if len(rt.starts) != 3 || rt.starts[0] != want[0] || rt.starts[1] != want[1] || rt.starts[2] != want[2] {
			t.Errorf("stream %v: starts %v, want %v", stream, rt.starts, want)
		}
		if len(rt.ends) != 3 || rt.ends[0].Outcome != upstream.Outcome(llm.KindOverloaded) ||
			!rt.ends[1].Retry || rt.ends[2].Outcome != upstream.OutcomeOK || rt.ends[2].Candidate != "good" {
			t.Errorf("stream %v: ends %+v", stream, rt.ends)
		}
		if len(seen) != 3 || seen[0] != 0 || seen[1] != 1 || seen[2] != 2 {
			t.Errorf("stream %v: the backends got attempt contexts %v, want [0 1 2]", stream, seen)
		}
	}
}

// TestRouter_TracerSeesARefusedAttempt: an attempt that ends the call (a
// caller fault) is ended on the Tracer too.
func TestRouter_TracerSeesARefusedAttempt(t *testing.T) {
	rt := &recordingTracer{}
	b := flaky(1, &llm.Error{Kind: llm.KindInvalidRequest, Message: "bad"})
	r := upstream.NewRouterWithOptions(upstream.RouterOptions{Tracer: rt}, []upstream.Candidate{cand("a", b)})
	_, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, hello)
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindInvalidRequest {
		t.Fatalf("err %v", err)
	}
	if len(rt.ends) != 1 || rt.ends[0].Outcome != upstream.Outcome(llm.KindInvalidRequest) {
		t.Errorf("ends %+v", rt.ends)
	}
}

func TestTraceparent_Context(t *testing.T) {
	ctx := context.Background()
	if upstream.Traceparent(ctx) != "" {
		t.Error("a traceparent in an empty context")
	}
	if got := upstream.Traceparent(upstream.WithTraceparent(ctx, "00-x-y-01")); got != "00-x-y-01" {
		t.Errorf("Traceparent = %q", got)
	}
}
