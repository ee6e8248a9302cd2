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
	// Text, when not nil, holds the vectors instead, as text in the form
	// Wire (see llm.Embeddings.Text), already checked; Counts[i] is how
	// many values Text[i] holds.
	Text   [][]byte
	Counts []int
	Wire   llm.EmbedWire
	Tokens int
}

func (b *EmbedBatch) len() int {
	if b.Text != nil {
		return len(b.Text)
	}
	return len(b.Vectors)
}

// floats turns b's text, if any, into values.
func (b *EmbedBatch) floats() error {
	if b.Text == nil {
		return nil
	}
	b.Vectors = make([][]float32, len(b.Text))
	for i, t := range b.Text {
		v, err := llm.DecodeEmbedText(b.Wire, t)
		if err != nil {
			return upstream.Malformed(err)
		}
		b.Vectors[i] = v
	}
	b.Text, b.Counts = nil, nil
	return nil
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
		return &llm.Embeddings{Vectors: b.Vectors, Text: b.Text, Wire: b.Wire, Dims: sameCount(b.Counts),
			Usage: llm.Usage{InputTokens: max(b.Tokens, 0)}}, nil
	}
	out := &llm.Embeddings{}
	batches := (n + size - 1) / size
	tokens := make([]int, batches)
	all := make([]EmbedBatch, batches)
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
			all[i] = b
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
	// The batches' text is kept if every batch has it, in one form.
	text := true
	for i := range all {
		text = text && all[i].Text != nil && all[i].Wire == all[0].Wire
	}
	if text {
		out.Text, out.Wire = make([][]byte, 0, n), all[0].Wire
		counts := make([]int, 0, n)
		for i := range all {
			out.Text = append(out.Text, all[i].Text...)
			counts = append(counts, all[i].Counts...)
		}
		out.Dims = sameCount(counts)
		return out, nil
	}
	out.Vectors = make([][]float32, 0, n)
	for i := range all {
		if err := all[i].floats(); err != nil {
			return nil, err
		}
		out.Vectors = append(out.Vectors, all[i].Vectors...)
	}
	return out, nil
}

// sameCount returns the count every vector has, or -1 when they differ
// (and 0 for none).
func sameCount(counts []int) int {
	if len(counts) == 0 {
		return 0
	}
	for _, c := range counts {
		if c != counts[0] {
			return -1
		}
	}
	return counts[0]
}

func checkCount(b EmbedBatch, want int) error {
	if b.len() != want || b.Text != nil && len(b.Counts) != len(b.Text) {
		return &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgEmbedCount,
			Err: fmt.Errorf("upstream returned %d vectors for %d inputs", b.len(), want)}
	}
	return nil
}

// FitEmbeddings checks e's vectors and fits them to dims (see
// FitDimensions). Text of vectors that all hold dims values (or, when dims
// is 0, the same non-zero count) is kept as it is; any other is parsed
// into values first, and fitted as values are.
func FitEmbeddings(e *llm.Embeddings, dims int) error {
	if e.Text != nil {
		if e.Dims > 0 && (dims == 0 || e.Dims == dims) {
			return nil
		}
		if err := e.Floats(); err != nil {
			return upstream.Malformed(err)
		}
	}
	return FitDimensions(e.Vectors, dims)
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
