package upstream_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// fakeEmbedder is a backend that also embeds, with EmbedFn.
type fakeEmbedder struct {
	*fakeBackend
	EmbedFn func(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error)
	embeds  atomic.Int32
}

var _ upstream.Embedder = (*fakeEmbedder)(nil)

func (b *fakeEmbedder) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
	b.embeds.Add(1)
	return b.EmbedFn(ctx, req)
}

func embedding(vectors [][]float32, input int) *fakeEmbedder {
	return &fakeEmbedder{fakeBackend: answering("x"), EmbedFn: func(context.Context, *llm.EmbedRequest) (*llm.Embeddings, error) {
		return &llm.Embeddings{Vectors: vectors, Usage: llm.Usage{InputTokens: input}}, nil
	}}
}

func TestRouter_Embed(t *testing.T) {
	ctx := context.Background()
	req := func() *llm.EmbedRequest {
		return &llm.EmbedRequest{Model: "m", Inputs: []llm.EmbedInput{{Text: "a"}, {Text: "b"}}, InputTokens: 2}
	}
	noSleep := upstream.RouterOptions{Sleep: func(context.Context, time.Duration) error { return nil }}
	two := [][]float32{{1, 0}, {0, 1}}

	t.Run("skips candidates that cannot embed", func(t *testing.T) {
		is := is.New(t)
		gen, emb := answering("gen"), embedding(two, 2)
		r := upstream.NewRouterWithOptions(noSleep, []upstream.Candidate{cand("gen", gen), cand("emb", emb)})
		out, rep, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierMedium, req())
		is.NoErr(err)
		is.Equal(out.Vectors, two)
		is.Equal(rep.Candidate, "emb")
		is.Equal(len(rep.Attempts), 1)
		is.Equal(gen.calls.Load(), int32(0))
	})
	t.Run("falls back from a failing embedder, as a generation does", func(t *testing.T) {
		is := is.New(t)
		bad := &fakeEmbedder{fakeBackend: answering("x"), EmbedFn: func(context.Context, *llm.EmbedRequest) (*llm.Embeddings, error) {
			return nil, errors.New("dial tcp: vendor-x refused")
		}}
		good := embedding(two, 2)
		r := upstream.NewRouterWithOptions(noSleep, []upstream.Candidate{cand("bad", bad), cand("good", good)})
		out, rep, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierMedium, req())
		is.NoErr(err)
		is.Equal(out.Vectors, two)
		is.Equal(rep.Candidate, "good")
		is.True(bad.embeds.Load() >= 1)
	})
	t.Run("a reply that does not answer every input is the backend's fault", func(t *testing.T) {
		is := is.New(t)
		short := embedding([][]float32{{1, 0}}, 2)
		ragged := embedding([][]float32{{1, 0}, {1}}, 2)
		r := upstream.NewRouterWithOptions(noSleep, []upstream.Candidate{cand("short", short), cand("ragged", ragged)})
		_, _, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierMedium, req())
		var e *llm.Error
		is.True(errors.As(err, &e))
		is.Equal(e.Kind, llm.KindUpstream)
		is.Equal(e.Message, "the upstream model returned an invalid reply") // names no backend
		is.True(short.embeds.Load() >= 1)
		is.True(ragged.embeds.Load() >= 1)
	})
	t.Run("a vector of another length than asked is refused", func(t *testing.T) {
		is := is.New(t)
		r := upstream.NewRouterWithOptions(noSleep, []upstream.Candidate{cand("e", embedding(two, 2))})
		q := req()
		q.Dimensions = 3
		_, _, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierMedium, q)
		is.True(err != nil)
	})
	t.Run("reported input is bounded by svcgw's count", func(t *testing.T) {
		is := is.New(t)
		r := upstream.NewRouterWithOptions(noSleep, []upstream.Candidate{cand("e", embedding(two, 1<<30))})
		out, _, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierMedium, req())
		is.NoErr(err)
		is.Equal(out.Usage.InputTokens, 2*2+1024) // inputTextFactor × count + overhead
	})
	t.Run("a route without an embedder: embeddings are not served", func(t *testing.T) {
		is := is.New(t)
		r := upstream.NewRouter([]upstream.Candidate{cand("gen", answering("gen"))})
		_, _, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierMedium, req())
		is.True(errors.Is(err, upstream.ErrNoEmbeddings))
		is.Equal(len(r.Blocked()), 0) // not offered, so not blocked
	})
	t.Run("the fixture embeds through the router", func(t *testing.T) {
		is := is.New(t)
		r := upstream.NewRouter([]upstream.Candidate{cand("fx", fixture.New(fixture.Options{}))})
		out, _, err := r.Embed(ctx, llm.TypeEmbedding, llm.TierLow, req())
		is.NoErr(err)
		is.Equal(len(out.Vectors), 2)
		is.Equal(len(out.Vectors[0]), 1536)
		is.Equal(out.Usage.InputTokens, 2)
	})
}
