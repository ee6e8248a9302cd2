package upstream_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// fakeBackend is a Backend of function fields that counts its calls.
type fakeBackend struct {
	CompleteFn func(ctx context.Context, req *llm.Request) (*llm.Response, error)
	StreamFn   func(ctx context.Context, req *llm.Request) (upstream.Stream, error)
	calls      atomic.Int32
}

var _ upstream.Backend = (*fakeBackend)(nil)

func (b *fakeBackend) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	b.calls.Add(1)
	return b.CompleteFn(ctx, req)
}

func (b *fakeBackend) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	b.calls.Add(1)
	return b.StreamFn(ctx, req)
}

// answering returns a backend that replies with text, whole or as one delta
// and a finish event.
func answering(text string) *fakeBackend {
	return &fakeBackend{
		CompleteFn: func(context.Context, *llm.Request) (*llm.Response, error) {
			return &llm.Response{Content: []llm.Part{llm.TextPart(text)}, FinishReason: llm.FinishStop}, nil
		},
		StreamFn: func(context.Context, *llm.Request) (upstream.Stream, error) {
			return &sliceStream{events: []llm.Event{
				{Type: llm.EventTextDelta, Text: text},
				{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &llm.Usage{}},
			}}, nil
		},
	}
}

// failing returns a backend whose calls fail with err, or whose streams fail
// with err after the given events.
func failing(err error, after ...llm.Event) *fakeBackend {
	return &fakeBackend{
		CompleteFn: func(context.Context, *llm.Request) (*llm.Response, error) { return nil, err },
		StreamFn: func(context.Context, *llm.Request) (upstream.Stream, error) {
			return &sliceStream{events: after, err: err}, nil
		},
	}
}

// sliceStream replays events, then reports err.
type sliceStream struct {
	events []llm.Event
	err    error
	i      int
	closed bool
}

func (s *sliceStream) Next() bool {
	if s.i >= len(s.events) {
		return false
	}
	s.i++
	return true
}
func (s *sliceStream) Event() llm.Event { return s.events[s.i-1] }
func (s *sliceStream) Err() error {
	if s.i >= len(s.events) {
		return s.err
	}
	return nil
}
func (s *sliceStream) Close() error { s.closed = true; return nil }

// chatRequest is a conversation of user turns.
func chatRequest(texts ...string) *llm.Request {
	r := &llm.Request{Model: "svc-fusion"}
	for _, t := range texts {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(t)}})
	}
	return r
}

// streamed reads s to its end, failing the test on a stream error, and
// returns what its reasoning and text deltas add up to.
func streamed(t *testing.T, s upstream.Stream) (out struct{ reasoning, text string }) {
	t.Helper()
	defer s.Close()
	for s.Next() {
		switch ev := s.Event(); ev.Type {
		case llm.EventReasoningDelta:
			out.reasoning += ev.Text
		case llm.EventTextDelta:
			out.text += ev.Text
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return out
}

func cand(name string, b upstream.Backend) upstream.Candidate {
	return upstream.Candidate{Name: name, Backend: b}
}

func TestRouter_selection(t *testing.T) {
	is := is.New(t)
	def, code := answering("default"), answering("code")
	r := upstream.NewRouter([]upstream.Candidate{cand("def", def)})
	r.Set(llm.TypeCode, llm.TierHigh, []upstream.Candidate{cand("code", code)})

	resp, _, err := r.Complete(context.Background(), llm.TypeCode, llm.TierHigh, chatRequest("x"))
	is.NoErr(err)
	is.Equal(resp.Text(), "code") // the route's own candidate

	resp, _, err = r.Complete(context.Background(), llm.TypeCode, llm.TierLow, chatRequest("x"))
	is.NoErr(err)
	is.Equal(resp.Text(), "default") // another tier uses the default

	s, _, err := r.Stream(context.Background(), llm.TypeCode, llm.TierHigh, chatRequest("x"))
	is.NoErr(err)
	is.Equal(streamed(t, s).text, "code")

	is.Equal(len(r.Candidates(llm.TypeCode, llm.TierHigh)), 1)
	is.Equal(r.Candidates(llm.TypeCode, llm.TierHigh)[0].Name, "code")
	is.Equal(r.Candidates(llm.TypePro, llm.TierMedium)[0].Name, "def")
	r.Candidates(llm.TypePro, llm.TierMedium)[0].Name = "changed"
	is.Equal(r.Candidates(llm.TypePro, llm.TierMedium)[0].Name, "def") // Candidates returns a copy

	r.Set(llm.TypeCode, llm.TierHigh, nil) // back to the default
	is.Equal(r.Candidates(llm.TypeCode, llm.TierHigh)[0].Name, "def")
}

func TestRouter_Complete_fallback(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:443: vendor-x refused")
	tests := []struct {
		name      string
		first     *fakeBackend
		wantText  string
		wantKind  llm.Kind
		wantCalls int32 // of the second candidate
	}{
		{"plain error falls back", failing(secret), "second", "", 1},
		{"overloaded falls back", failing(&llm.Error{Kind: llm.KindOverloaded, Message: "busy"}), "second", "", 1},
		{"invalid request does not", failing(&llm.Error{Kind: llm.KindInvalidRequest, Message: "bad"}), "", llm.KindInvalidRequest, 0},
		{"too large does not", failing(&llm.Error{Kind: llm.KindTooLarge, Message: "big"}), "", llm.KindTooLarge, 0},
		{"success does not", answering("first"), "first", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			second := answering("second")
			r := upstream.NewRouter([]upstream.Candidate{cand("a", tt.first), cand("b", second)})
			resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
			is.Equal(second.calls.Load(), tt.wantCalls)
			if tt.wantKind != "" {
				var e *llm.Error
				is.True(errors.As(err, &e))
				is.Equal(e.Kind, tt.wantKind)
				return
			}
			is.NoErr(err)
			is.Equal(resp.Text(), tt.wantText)
		})
	}
}

func TestRouter_errorsAreSafe(t *testing.T) {
	is := is.New(t)
	secret := errors.New("vendor-x: 500 internal error at https://api.vendor-x.example")
	r := upstream.NewRouter([]upstream.Candidate{cand("a", failing(secret)), cand("b", failing(secret))})

	_, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
	var e *llm.Error
	is.True(errors.As(err, &e))
	is.Equal(e.Kind, llm.KindUpstream)
	is.True(!strings.Contains(e.Message, "vendor")) // never the backend's text
	is.True(errors.Is(err, secret))                 // kept as the cause for logs

	_, _, err = r.Stream(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
	is.True(errors.As(err, &e))
	is.Equal(e.Kind, llm.KindUpstream)

	timeout := upstream.NewRouter([]upstream.Candidate{cand("a", failing(context.DeadlineExceeded))})
	_, _, err = timeout.Complete(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
	is.True(errors.As(err, &e))
	is.Equal(e.Kind, llm.KindTimeout) // a backend's own deadline, not the caller's

	empty := upstream.NewRouter(nil)
	_, _, err = empty.Complete(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
	is.True(errors.As(err, &e))
	is.Equal(e.Kind, llm.KindInternal)
	_, _, err = empty.Stream(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
	is.True(errors.As(err, &e))
	is.Equal(e.Kind, llm.KindInternal)
}

func TestRouter_Stream_fallback(t *testing.T) {
	secret := errors.New("connection reset by vendor-x")
	text := llm.Event{Type: llm.EventTextDelta, Text: "partial"}

	t.Run("failure before the first event falls back", func(t *testing.T) {
		is := is.New(t)
		var failed *sliceStream
		first := &fakeBackend{StreamFn: func(context.Context, *llm.Request) (upstream.Stream, error) {
			failed = &sliceStream{err: secret}
			return failed, nil
		}}
		r := upstream.NewRouter([]upstream.Candidate{cand("a", first), cand("b", answering("second"))})
		s, _, err := r.Stream(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
		is.NoErr(err)
		is.Equal(streamed(t, s).text, "second")
		is.True(failed.closed) // the failed stream was closed
	})

	t.Run("Stream error falls back", func(t *testing.T) {
		is := is.New(t)
		first := &fakeBackend{StreamFn: func(context.Context, *llm.Request) (upstream.Stream, error) { return nil, secret }}
		r := upstream.NewRouter([]upstream.Candidate{cand("a", first), cand("b", answering("second"))})
		s, _, err := r.Stream(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
		is.NoErr(err)
		is.Equal(streamed(t, s).text, "second")
	})

	t.Run("failure after the first event is the caller's", func(t *testing.T) {
		is := is.New(t)
		second := answering("second")
		r := upstream.NewRouter([]upstream.Candidate{cand("a", failing(secret, text)), cand("b", second)})
		s, _, err := r.Stream(context.Background(), llm.TypePro, llm.TierMedium, chatRequest("x"))
		is.NoErr(err)
		defer s.Close()
		is.True(s.Next())
		is.Equal(s.Event().Text, "partial")
		is.True(!s.Next())
		var e *llm.Error
		is.True(errors.As(s.Err(), &e))
		is.Equal(e.Kind, llm.KindUpstream)
		is.True(!strings.Contains(e.Message, "vendor"))
		is.Equal(second.calls.Load(), int32(0))
	})
}

func TestRouter_cancel(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	second := answering("second")
	r := upstream.NewRouter([]upstream.Candidate{
		cand("fixture", fixture.New(fixture.Options{})),
		cand("b", second),
	})
	_, _, err := r.Complete(ctx, llm.TypePro, llm.TierMedium, chatRequest("x"))
	is.True(errors.Is(err, context.Canceled)) // the caller left: ctx.Err() itself
	_, _, err = r.Stream(ctx, llm.TypePro, llm.TierMedium, chatRequest("x"))
	is.True(errors.Is(err, context.Canceled))
	is.Equal(second.calls.Load(), int32(0)) // no fallback for a caller that left
}

func TestRouter_Limits(t *testing.T) {
	is := is.New(t)
	r := upstream.NewRouter([]upstream.Candidate{cand("fixture", fixture.New(fixture.Options{}))})
	is.Equal(r.Limits(), upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 32000}) // filled in from the fixture

	r.Set(llm.TypeFlash, llm.TierLow, []upstream.Candidate{
		{Name: "small", Backend: answering("x"), Limits: upstream.Limits{ContextLength: 128000, MaxCompletionTokens: 64000}},
		{Name: "unknown", Backend: answering("x")},
	})
	r.Set(llm.TypeReason, llm.TierHigh, []upstream.Candidate{
		{Name: "terse", Backend: answering("x"), Limits: upstream.Limits{ContextLength: 400000, MaxCompletionTokens: 8192}},
	})
	is.Equal(r.Limits(), upstream.Limits{ContextLength: 128000, MaxCompletionTokens: 8192}) // the smallest of each

	is.Equal(upstream.NewRouter(nil).Limits(), upstream.Limits{})
	is.Equal(len(upstream.NewRouter([]upstream.Candidate{{Name: "no backend"}}).Candidates(llm.TypePro, llm.TierLow)), 0)
}

func TestRouter_withFixture(t *testing.T) {
	is := is.New(t)
	r := upstream.NewRouter([]upstream.Candidate{cand("fixture", fixture.New(fixture.Options{}))})
	req := chatRequest("hello")
	req.Reasoning = &llm.Reasoning{Enabled: true, Effort: "high"}
	resp, _, err := r.Complete(context.Background(), llm.TypeReason, llm.TierHigh, req)
	is.NoErr(err)
	s, _, err := r.Stream(context.Background(), llm.TypeReason, llm.TierHigh, req)
	is.NoErr(err)
	got := streamed(t, s)
	var reasoning string
	for _, p := range resp.Content {
		if p.Type == llm.PartReasoning {
			reasoning += p.Text
		}
	}
	is.True(reasoning != "")
	is.Equal(got.reasoning, reasoning)
	is.Equal(got.text, resp.Text()) // the router's first-event read loses nothing
}
