package protocol

import (
	"context"
	"encoding/base64"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

func TestFitDimensions(t *testing.T) {
	t.Run("longer than asked: cut and unit length again", func(t *testing.T) {
		is := is.New(t)
		vecs := [][]float32{{3, 4, 12}, {0, 0, 1}, {1, 1, 1}}
		is.NoErr(FitDimensions(vecs, 2))
		is.Equal(vecs[0], []float32{0.6, 0.8})
		is.Equal(vecs[1], []float32{0, 0}) // a zero vector stays zero
		is.True(math.Abs(float64(vecs[2][0])-1/math.Sqrt2) < 1e-6)
		is.Equal(cap(vecs[0]), 2) // no hidden tail
	})
	t.Run("as asked or no dimensions: as sent", func(t *testing.T) {
		is := is.New(t)
		vecs := [][]float32{{3, 4}}
		is.NoErr(FitDimensions(vecs, 2))
		is.NoErr(FitDimensions(vecs, 0))
		is.Equal(vecs[0], []float32{3, 4}) // not normalised: the upstream's own
	})
	for _, tc := range []struct {
		name string
		vecs [][]float32
		dims int
		msg  string
	}{
		{"shorter than asked", [][]float32{{1, 0}}, 3, upstream.MsgEmbedShort},
		{"an empty vector", [][]float32{{1}, {}}, 0, upstream.MsgMalformed},
		{"lengths that differ", [][]float32{{1, 0}, {1}}, 0, upstream.MsgMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var le *llm.Error
			is.True(errors.As(FitDimensions(tc.vecs, tc.dims), &le))
			is.Equal(le.Kind, llm.KindUpstream)
			is.Equal(le.Message, tc.msg)
		})
	}
}

func TestDecodeBase64Vector(t *testing.T) {
	is := is.New(t)
	v, err := DecodeBase64Vector("AACAPgAAAL8AAIA/") // 0.25, -0.5, 1 as little-endian float32
	is.NoErr(err)
	is.Equal(v, []float32{0.25, -0.5, 1})
	_, err = DecodeBase64Vector(base64.StdEncoding.EncodeToString([]byte{1, 2, 3}))
	is.True(err != nil) // not whole float32 values
	_, err = DecodeBase64Vector("not base64!")
	is.True(err != nil)
}

func TestEmbedBatches(t *testing.T) {
	vecs := func(lo, hi int) EmbedBatch {
		b := EmbedBatch{Tokens: hi - lo}
		for i := lo; i < hi; i++ {
			b.Vectors = append(b.Vectors, []float32{float32(i)})
		}
		return b
	}

	t.Run("batches in input order, tokens added up, at most four at once", func(t *testing.T) {
		is := is.New(t)
		var inFlight, most atomic.Int32
		e, err := EmbedBatches(t.Context(), 1050, 100, func(ctx context.Context, lo, hi int) (EmbedBatch, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			return vecs(lo, hi), nil
		})
		is.NoErr(err)
		is.Equal(len(e.Vectors), 1050)
		for i, v := range e.Vectors {
			is.Equal(v[0], float32(i))
		}
		is.Equal(e.Usage, llm.Usage{InputTokens: 1050})
		is.True(most.Load() <= embedParallel)
	})

	t.Run("one batch, on the caller's goroutine", func(t *testing.T) {
		is := is.New(t)
		calls := 0
		e, err := EmbedBatches(t.Context(), 3, 100, func(ctx context.Context, lo, hi int) (EmbedBatch, error) {
			calls++ // no race: not concurrent
			return vecs(lo, hi), nil
		})
		is.NoErr(err)
		is.Equal(calls, 1)
		is.Equal(len(e.Vectors), 3)
	})

	t.Run("a batch with the wrong count fails the call", func(t *testing.T) {
		is := is.New(t)
		_, err := EmbedBatches(t.Context(), 250, 100, func(ctx context.Context, lo, hi int) (EmbedBatch, error) {
			b := vecs(lo, hi)
			if lo == 100 {
				b.Vectors = b.Vectors[1:]
			}
			return b, nil
		})
		var le *llm.Error
		is.True(errors.As(err, &le))
		is.Equal(le.Message, upstream.MsgEmbedCount)
	})

	t.Run("a failed batch cancels the others and is the error", func(t *testing.T) {
		is := is.New(t)
		failure := &llm.Error{Kind: llm.KindOverloaded, Message: "overloaded"}
		var cancelled atomic.Int32
		_, err := EmbedBatches(t.Context(), 400, 100, func(ctx context.Context, lo, hi int) (EmbedBatch, error) {
			if lo == 0 {
				return EmbedBatch{}, failure
			}
			select {
			case <-ctx.Done():
				cancelled.Add(1)
				return EmbedBatch{}, ctx.Err()
			case <-time.After(5 * time.Second):
				return vecs(lo, hi), nil
			}
		})
		is.Equal(err, error(failure))
		is.True(cancelled.Load() > 0) // the batches in flight were cancelled
	})

	t.Run("the caller leaving is its own cancellation", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(t.Context())
		_, err := EmbedBatches(ctx, 400, 100, func(ctx context.Context, lo, hi int) (EmbedBatch, error) {
			if lo == 0 {
				cancel()
			}
			<-ctx.Done()
			return EmbedBatch{}, &llm.Error{Kind: llm.KindUpstream, Message: "cut", Err: ctx.Err()}
		})
		is.True(errors.Is(err, context.Canceled))
	})
}
