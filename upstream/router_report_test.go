package upstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// slow makes b advance clock by d on every call, as if the call took d.
func slow(clock *testClock, d time.Duration, b *fakeBackend) *fakeBackend {
	complete, stream := b.CompleteFn, b.StreamFn
	return &fakeBackend{
		CompleteFn: func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			clock.Advance(d)
			return complete(ctx, req)
		},
		StreamFn: func(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
			clock.Advance(d)
			return stream(ctx, req)
		},
	}
}

// TestRouter_Report checks what the router reports of each call: every
// attempt with its outcome, retries, fallbacks, waits and breaker state,
// and the candidate that served the call.
func TestRouter_Report(t *testing.T) {
	overloaded := &llm.Error{Kind: llm.KindOverloaded, Message: "busy"}
	ignoreErr := cmpopts.IgnoreFields(upstream.Attempt{}, "Err", "Backoff")

	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "complete", true: "stream"}[stream]
		call := func(r *upstream.Router, ctx context.Context) (upstream.Report, error) {
			if stream {
				s, rep, err := r.Stream(ctx, llm.TypePro, llm.TierMedium, hello)
				if err == nil {
					s.Close()
				}
				return rep, err
			}
			_, rep, err := r.Complete(ctx, llm.TypePro, llm.TierMedium, hello)
			return rep, err
		}

		t.Run(name+": retries, then the breaker opens and the call falls back", func(t *testing.T) {
			is := is.New(t)
			clock := &testClock{now: time.Unix(0, 0)}
			a := slow(clock, 40*time.Millisecond, failing(overloaded))
			b := slow(clock, 250*time.Millisecond, answering("from b"))
			r := newRetryRouter(clock, cand("a", a), cand("b", b))
			rep, err := call(r, context.Background())
			is.NoErr(err)
			want := []upstream.Attempt{
				{Candidate: "a", Outcome: "overloaded", Duration: 40 * time.Millisecond},
				{Candidate: "a", Outcome: "overloaded", Duration: 40 * time.Millisecond, Retry: true},
				{Candidate: "a", Outcome: "overloaded", Duration: 40 * time.Millisecond, Retry: true, BreakerOpen: true}, // the third failure in a row
				{Candidate: "b", Outcome: upstream.OutcomeOK, Duration: 250 * time.Millisecond},
			}
			if d := cmp.Diff(want, rep.Attempts, ignoreErr); d != "" {
				t.Fatalf("attempts (-want +got):\n%s", d)
			}
			is.Equal(rep.Candidate, "b")
			is.Equal(rep.Retries(), 2)
			is.Equal(rep.Fallbacks(), 1)
			is.Equal(rep.Attempts[0].Err, error(overloaded)) // the backend's own error, for logs
			is.Equal(rep.Attempts[3].Err, nil)
			is.Equal(rep.Attempts[0].Backoff, time.Duration(0))
			is.Equal([]time.Duration{rep.Attempts[1].Backoff, rep.Attempts[2].Backoff}, clock.waits) // the waits before the retries

			// While a's breaker is open, calls go to b alone.
			rep, err = call(r, context.Background())
			is.NoErr(err)
			if d := cmp.Diff([]upstream.Attempt{{Candidate: "b", Outcome: upstream.OutcomeOK, Duration: 250 * time.Millisecond}}, rep.Attempts, ignoreErr); d != "" {
				t.Fatalf("attempts (-want +got):\n%s", d)
			}
			is.Equal(rep.Fallbacks(), 0)
		})

		t.Run(name+": a route without candidates makes no attempt", func(t *testing.T) {
			is := is.New(t)
			rep, err := call(newRetryRouter(&testClock{}), context.Background())
			is.True(err != nil)
			is.Equal(len(rep.Attempts), 0)
			is.Equal(rep.Candidate, "")
		})

		t.Run(name+": a caller fault ends the call at the first attempt", func(t *testing.T) {
			is := is.New(t)
			clock := &testClock{now: time.Unix(0, 0)}
			bad := failing(&llm.Error{Kind: llm.KindInvalidRequest, Message: "bad"})
			rep, err := call(newRetryRouter(clock, cand("a", bad), cand("b", answering("b"))), context.Background())
			is.True(err != nil)
			if d := cmp.Diff([]upstream.Attempt{{Candidate: "a", Outcome: "invalid_request"}}, rep.Attempts, ignoreErr); d != "" {
				t.Fatalf("attempts (-want +got):\n%s", d)
			}
			is.Equal(rep.Candidate, "") // none served it
		})

		t.Run(name+": a caller that left", func(t *testing.T) {
			is := is.New(t)
			clock := &testClock{now: time.Unix(0, 0)}
			ctx, cancel := context.WithCancel(context.Background())
			leaving := &fakeBackend{
				CompleteFn: func(context.Context, *llm.Request) (*llm.Response, error) { cancel(); return nil, context.Canceled },
				StreamFn:   func(context.Context, *llm.Request) (upstream.Stream, error) { cancel(); return nil, context.Canceled },
			}
			rep, err := call(newRetryRouter(clock, cand("a", leaving), cand("b", answering("b"))), ctx)
			is.True(err != nil)
			if d := cmp.Diff([]upstream.Attempt{{Candidate: "a", Outcome: upstream.OutcomeCanceled}}, rep.Attempts, ignoreErr); d != "" {
				t.Fatalf("attempts (-want +got):\n%s", d)
			}
		})
	}
}
