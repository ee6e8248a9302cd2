package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/openai"
)

// fakeEmbedder is a fakeBackend that also embeds, counting its Embed calls.
type fakeEmbedder struct {
	fakeBackend
	EmbedFn func(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error)
	embeds  atomic.Int32
}

var _ upstream.Embedder = (*fakeEmbedder)(nil)

func (b *fakeEmbedder) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
	b.embeds.Add(1)
	return b.EmbedFn(ctx, req)
}

// embedding returns an embedder whose every vector is {x}, reporting
// tokens input tokens; failing its first n calls with err.
func embedding(x float32, tokens int, n int, err error) *fakeEmbedder {
	b := &fakeEmbedder{fakeBackend: *answering("generation")}
	var calls atomic.Int32
	b.EmbedFn = func(_ context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
		if int(calls.Add(1)) <= n {
			return nil, err
		}
		e := &llm.Embeddings{Usage: llm.Usage{InputTokens: tokens}}
		for range req.Inputs {
			e.Vectors = append(e.Vectors, []float32{x})
		}
		return e, nil
	}
	return b
}

func embedReq(texts ...string) *llm.EmbedRequest {
	req := &llm.EmbedRequest{Model: "svc-embed"}
	for _, s := range texts {
		req.Inputs = append(req.Inputs, llm.EmbedInput{Text: s})
	}
	return req
}

func TestRouter_Embed(t *testing.T) {
	t.Run("backends that cannot embed are passed over", func(t *testing.T) {
		is := is.New(t)
		gen := answering("generation only")
		r := upstream.NewRouter([]upstream.Candidate{cand("gen", gen), cand("emb", embedding(1, 3, 0, nil))})
		e, rep, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a", "b"))
		is.NoErr(err)
		is.Equal(e.Vectors, [][]float32{{1}, {1}})
		is.Equal(e.Usage.InputTokens, 3)
		is.Equal(rep.Candidate, "emb")
		is.Equal(len(rep.Attempts), 1) // no attempt on the generation backend
		is.Equal(gen.calls.Load(), int32(0))
	})

	t.Run("a route with no embedder does not serve embeddings, before any attempt", func(t *testing.T) {
		is := is.New(t)
		r := upstream.NewRouter([]upstream.Candidate{cand("gen", answering("x"))})
		_, rep, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a"))
		is.True(errors.Is(err, upstream.ErrNoEmbeddings))
		var le *llm.Error
		is.True(errors.As(err, &le))
		is.Equal(le.Kind, llm.KindNotFound)
		is.Equal(len(rep.Attempts), 0)
		is.Equal(len(r.Blocked()), 0) // not offered, so not blocked
	})

	t.Run("a vector of another length than asked, or not finite, is the backend's fault", func(t *testing.T) {
		for name, c := range map[string]struct {
			v    []float32
			dims int
		}{
			"short": {[]float32{1}, 2}, "long": {[]float32{1, 0, 0}, 2},
			"NaN": {[]float32{float32(math.NaN()), 0}, 0}, "empty": {[]float32{}, 0},
		} {
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				b := &fakeEmbedder{fakeBackend: *answering("x")}
				b.EmbedFn = func(context.Context, *llm.EmbedRequest) (*llm.Embeddings, error) {
					return &llm.Embeddings{Vectors: [][]float32{c.v}}, nil
				}
				r := upstream.NewRouter([]upstream.Candidate{cand("e", b)})
				q := embedReq("a")
				q.Dimensions = c.dims
				_, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, q)
				var le *llm.Error
				is.True(errors.As(err, &le))
				is.Equal(le.Kind, llm.KindUpstream)
				is.True(b.embeds.Load() >= 1)
			})
		}
	})

	t.Run("vectors as text must be in the caller's form and of the length asked", func(t *testing.T) {
		for name, c := range map[string]struct {
			e    llm.Embeddings
			dims int
			ok   bool
		}{
			"as asked":         {llm.Embeddings{Text: [][]byte{[]byte("[1,0]")}, Wire: llm.WireOpenAIFloats, Dims: 2}, 2, true},
			"any length":       {llm.Embeddings{Text: [][]byte{[]byte("[1,0]")}, Wire: llm.WireOpenAIFloats, Dims: 2}, 0, true},
			"another form":     {llm.Embeddings{Text: [][]byte{[]byte("AACAPw==")}, Wire: llm.WireOpenAIBase64, Dims: 1}, 0, false},
			"short":            {llm.Embeddings{Text: [][]byte{[]byte("[1]")}, Wire: llm.WireOpenAIFloats, Dims: 1}, 2, false},
			"unequal lengths":  {llm.Embeddings{Text: [][]byte{[]byte("[1]")}, Wire: llm.WireOpenAIFloats, Dims: -1}, 0, false},
			"no form":          {llm.Embeddings{Text: [][]byte{[]byte("[1]")}, Dims: 1}, 0, false},
			"a vector too few": {llm.Embeddings{Text: [][]byte{}, Wire: llm.WireOpenAIFloats, Dims: 2}, 2, false},
		} {
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				b := &fakeEmbedder{fakeBackend: *answering("x")}
				b.EmbedFn = func(context.Context, *llm.EmbedRequest) (*llm.Embeddings, error) {
					e := c.e
					return &e, nil
				}
				r := upstream.NewRouter([]upstream.Candidate{cand("e", b)})
				q := embedReq("a")
				q.Dimensions, q.Wire = c.dims, llm.WireOpenAIFloats
				out, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, q)
				if c.ok {
					is.NoErr(err)
					is.Equal(string(out.Text[0]), "[1,0]")
					return
				}
				var le *llm.Error
				is.True(errors.As(err, &le))
				is.Equal(le.Kind, llm.KindUpstream)
			})
		}
	})

	t.Run("the fixture embeds through the router", func(t *testing.T) {
		is := is.New(t)
		r := upstream.NewRouter([]upstream.Candidate{cand("fx", fixture.New(fixture.Options{}))})
		q := embedReq("a", "b")
		q.InputTokens = 2
		out, _, err := r.Embed(context.Background(), llm.TypeEmbedding, llm.TierLow, q)
		is.NoErr(err)
		is.Equal(len(out.Vectors), 2)
		is.Equal(len(out.Vectors[0]), 1536)
		is.Equal(out.Usage.InputTokens, 2)
	})

	t.Run("transient failures are retried with backoff", func(t *testing.T) {
		is := is.New(t)
		clock := &testClock{now: time.Unix(0, 0)}
		b := embedding(1, 3, 2, &llm.Error{Kind: llm.KindOverloaded, Message: "busy"})
		r := newRetryRouter(clock, cand("a", b))
		_, rep, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a"))
		is.NoErr(err)                       // recovered
		is.Equal(b.embeds.Load(), int32(3)) // 1 + 2 retries
		is.Equal(len(clock.waits), 2)
		is.Equal(rep.Retries(), 2)
	})

	t.Run("then the next candidate", func(t *testing.T) {
		is := is.New(t)
		clock := &testClock{now: time.Unix(0, 0)}
		down := embedding(1, 3, 100, &llm.Error{Kind: llm.KindUpstream, Message: "failed"})
		r := newRetryRouter(clock, cand("a", down), cand("b", embedding(2, 3, 0, nil)))
		e, rep, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a"))
		is.NoErr(err)
		is.Equal(e.Vectors, [][]float32{{2}})
		is.Equal(rep.Candidate, "b")
		is.Equal(rep.Fallbacks(), 1)
	})

	t.Run("the caller's fault is neither retried nor moved", func(t *testing.T) {
		is := is.New(t)
		clock := &testClock{now: time.Unix(0, 0)}
		bad := embedding(1, 3, 100, &llm.Error{Kind: llm.KindInvalidRequest, Message: "bad"})
		other := embedding(2, 3, 0, nil)
		r := newRetryRouter(clock, cand("a", bad), cand("b", other))
		_, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a"))
		var le *llm.Error
		is.True(errors.As(err, &le))
		is.Equal(le.Kind, llm.KindInvalidRequest)
		is.Equal(bad.embeds.Load(), int32(1))
		is.Equal(other.embeds.Load(), int32(0))
	})

	t.Run("the breaker is the candidate's, shared with generation", func(t *testing.T) {
		is := is.New(t)
		clock := &testClock{now: time.Unix(0, 0)}
		down := embedding(1, 3, 100, &llm.Error{Kind: llm.KindUpstream, Message: "failed"})
		r := newRetryRouter(clock, cand("a", down), cand("b", embedding(2, 3, 0, nil)))
		_, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a")) // 3 failures: open
		is.NoErr(err)
		resp, rep, err := r.Complete(context.Background(), llm.TypePro, llm.TierLow, hello)
		is.NoErr(err)
		is.Equal(resp.Text(), "generation")
		is.Equal(rep.Candidate, "b") // a is skipped while open
		is.Equal(down.calls.Load(), int32(0))
	})

	t.Run("a vector count that does not match is an upstream failure", func(t *testing.T) {
		is := is.New(t)
		short := &fakeEmbedder{EmbedFn: func(context.Context, *llm.EmbedRequest) (*llm.Embeddings, error) {
			return &llm.Embeddings{Vectors: [][]float32{{1}}}, nil
		}}
		r := upstream.NewRouterWithOptions(upstream.RouterOptions{MaxRetries: -1}, []upstream.Candidate{cand("short", short), cand("b", embedding(2, 3, 0, nil))})
		e, rep, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a", "b"))
		is.NoErr(err)
		is.Equal(e.Vectors, [][]float32{{2}, {2}}) // from the next candidate
		is.Equal(rep.Attempts[0].Outcome, upstream.Outcome(llm.KindUpstream))
	})

	t.Run("usage is bounded by the inputs", func(t *testing.T) {
		is := is.New(t)
		over := &fakeEmbedder{EmbedFn: func(_ context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
			return &llm.Embeddings{Vectors: [][]float32{{1}}, Usage: llm.Usage{InputTokens: 1 << 40, OutputTokens: 7, CachedInputTokens: -3}}, nil
		}}
		r := upstream.NewRouter([]upstream.Candidate{cand("over", over)})
		req := embedReq("four words of text")
		req.InputTokens = 5
		e, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, req)
		is.NoErr(err)
		is.Equal(e.Usage, llm.Usage{InputTokens: 5*2 + 1024 + 16}) // the margin of embedBounds; no output
	})

	t.Run("errors are safe", func(t *testing.T) {
		is := is.New(t)
		leaky := &fakeEmbedder{EmbedFn: func(context.Context, *llm.EmbedRequest) (*llm.Embeddings, error) {
			return nil, errors.New("dial tcp secret-backend.internal:443: refused")
		}}
		r := upstream.NewRouterWithOptions(upstream.RouterOptions{MaxRetries: -1}, []upstream.Candidate{cand("leaky", leaky)})
		_, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a"))
		var le *llm.Error
		is.True(errors.As(err, &le))
		is.Equal(le.Kind, llm.KindUpstream)
		is.Equal(le.Message, "the upstream model failed")
	})

	t.Run("equals: the same first input lands on the same member", func(t *testing.T) {
		is := is.New(t)
		var group []upstream.Candidate
		members := map[float32]*fakeEmbedder{}
		for i := range 4 {
			b := embedding(float32(i), 1, 0, nil)
			members[float32(i)] = b
			group = append(group, upstream.Candidate{Name: fmt.Sprintf("m%d", i), Backend: b, Group: "pool"})
		}
		r := upstream.NewRouter(group)
		served := map[float32]bool{}
		for i := range 20 {
			first, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq(fmt.Sprint("doc ", i), "x"))
			is.NoErr(err)
			again, _, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq(fmt.Sprint("doc ", i), "y"))
			is.NoErr(err)
			is.Equal(first.Vectors[0], again.Vectors[0]) // the same member
			served[first.Vectors[0][0]] = true
		}
		is.True(len(served) > 1) // and the calls spread over the group
	})
}

// TestRouter_EmbedAcrossProtocols: an embeddings route of a Gemini
// upstream that is overloaded and an OpenAI-compatible one falls back from
// the first to the second, over real HTTP, and what comes back names
// neither.
func TestRouter_EmbedAcrossProtocols(t *testing.T) {
	is := is.New(t)
	var overloaded atomic.Int32
	gm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		overloaded.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":503,"message":"The model gemini-embedding-001 is overloaded.","status":"UNAVAILABLE"}}`)
	}))
	defer gm.Close()
	oa := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0,1]},{"object":"embedding","index":0,"embedding":[1,0]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":4,"total_tokens":4}}`)
	}))
	defer oa.Close()
	r := upstream.NewRouterWithOptions(upstream.RouterOptions{MaxRetries: -1}, []upstream.Candidate{
		{Name: "google", Backend: gemini.New(upstream.HTTPOptions{BaseURL: gm.URL, Model: "gemini-embedding-001"})},
		{Name: "vllm", Backend: openai.New(upstream.HTTPOptions{BaseURL: oa.URL + "/v1", Model: "text-embedding-3-small"})},
	})
	e, rep, err := r.Embed(context.Background(), llm.TypePro, llm.TierLow, embedReq("a", "b"))
	is.NoErr(err)
	is.Equal(e.Vectors, [][]float32{{1, 0}, {0, 1}})
	is.Equal(e.Usage.InputTokens, 4)
	is.Equal(overloaded.Load(), int32(1))
	is.Equal(rep.Candidate, "vllm")
	is.Equal(rep.Attempts[0].Outcome, upstream.Outcome(llm.KindOverloaded))
}
