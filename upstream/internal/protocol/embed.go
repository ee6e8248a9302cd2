package protocol

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"golang.org/x/sync/errgroup"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// What the protocol backends share when embedding: splitting a call's
// inputs into the batches a protocol accepts, and checking (and fitting)
// the vectors an upstream returned.

// embedParallel is how many batches of one call are in flight at once: a
// call far beyond a protocol's batch limit (an OpenAI-shaped batch of
// 2,048 texts sent over a protocol that takes 100) finishes in a few
// round trips, without opening dozens of requests to one upstream at once.
const embedParallel = 4

// EmbedBatch is one upstream request's share of a call's inputs: its
// vectors in input order and the input tokens the upstream reported (0
// when it did not).
type EmbedBatch struct {
	Vectors [][]float32
	Tokens  int
}

// EmbedBatch returns the batch size of a protocol whose limit is limit:
// the backend's HTTPOptions.EmbedBatch when set and smaller, else limit.
func (h *Client) EmbedBatch(limit int) int {
	if n := h.Opts.EmbedBatch; n > 0 && n < limit {
		return n
	}
	return limit
}

// EmbedBatches embeds n inputs in batches of at most size, calling send
// with each batch's range [lo, hi) (at most embedParallel at once), and
// returns every vector in input order with the tokens reported added up.
// A batch whose vector count is not hi-lo fails the call as an upstream
// error; so does any batch's failure, which cancels the batches still in
// flight (the first error is returned). One batch (the usual call) is sent
// on the caller's goroutine.
func EmbedBatches(ctx context.Context, n, size int, send func(ctx context.Context, lo, hi int) (EmbedBatch, error)) (*llm.Embeddings, error) {
	if n == 0 {
		return &llm.Embeddings{}, nil
	}
	if size <= 0 || n <= size {
		b, err := send(ctx, 0, n)
		if err != nil {
			return nil, err
		}
		if err := checkCount(b, n); err != nil {
			return nil, err
		}
		return &llm.Embeddings{Vectors: b.Vectors, Usage: llm.Usage{InputTokens: max(b.Tokens, 0)}}, nil
	}
	out := &llm.Embeddings{Vectors: make([][]float32, n)}
	batches := (n + size - 1) / size
	tokens := make([]int, batches)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(embedParallel)
	for i := range batches {
		lo, hi := i*size, min((i+1)*size, n)
		g.Go(func() error {
			b, err := send(gctx, lo, hi)
			if err != nil {
				return err
			}
			if err := checkCount(b, hi-lo); err != nil {
				return err
			}
			copy(out.Vectors[lo:hi], b.Vectors)
			tokens[i] = b.Tokens
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		// A batch cancelled because a sibling failed reports the group's
		// cancellation; Wait returns the sibling's error, the cause. The
		// caller's own cancellation comes back as its ctx.Err().
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	for _, t := range tokens {
		out.Usage.InputTokens = AddTokens(out.Usage.InputTokens, t)
	}
	return out, nil
}

func checkCount(b EmbedBatch, want int) error {
	if len(b.Vectors) != want {
		return &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgEmbedCount,
			Err: fmt.Errorf("upstream returned %d vectors for %d inputs", len(b.Vectors), want)}
	}
	return nil
}

// FitDimensions checks the vectors of a reply and fits them to the call's
// dimensions (0: the model's default). Every vector must have the same,
// non-zero length. One longer than asked (an upstream that ignores the
// field: an older model, a compatible server) is cut to dims and scaled
// back to unit length, which is what the vendors' own Matryoshka models do
// when asked for fewer dimensions; one shorter than asked is an upstream
// error, as the caller's index expects the length it asked for.
func FitDimensions(vecs [][]float32, dims int) error {
	n := -1
	for i, v := range vecs {
		if len(v) == 0 {
			return upstream.Malformed(fmt.Errorf("embedding %d is empty", i))
		}
		if n >= 0 && len(v) != n {
			return upstream.Malformed(fmt.Errorf("embedding %d has %d dimensions, embedding 0 has %d", i, len(v), n))
		}
		n = len(v)
	}
	if dims <= 0 || n < 0 || n == dims {
		return nil
	}
	if n < dims {
		return &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgEmbedShort,
			Err: fmt.Errorf("upstream returned %d dimensions, %d asked", n, dims)}
	}
	for i, v := range vecs {
		vecs[i] = normalize(v[:dims:dims])
	}
	return nil
}

// normalize scales v to unit length in place (a zero vector stays zero).
func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return v
}

// DecodeBase64Vector reads an embedding sent as base64 (OpenAI's
// encoding_format "base64"): the vector's float32 values, little-endian.
func DecodeBase64Vector(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("base64 embedding: %w", err)
	}
	if len(b)%4 != 0 {
		return nil, errors.New("base64 embedding is not a whole number of float32 values")
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// ScanFloats reads an array of numbers (or null) as a []float32 field gets
// it from encoding/json: each number parsed to 32 bits, null a nil slice,
// [] an empty one; anything else fails the scan.
func ScanFloats(sc *Scanner) []float32 {
	if sc.Null() {
		return nil
	}
	if !sc.Open('[') {
		return nil
	}
	v := []float32{}
	for first := true; sc.More(']', first); first = false {
		v = append(v, sc.Float32())
	}
	return v
}
