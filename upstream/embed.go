package upstream

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/svcgw/svcgw/llm"
)

// Embed sends an embeddings call to the route's candidates whose Backend
// is an Embedder (the others are passed over, as a backend that cannot
// embed is never routed an embeddings call) until one answers, by the
// rules of Complete (see Router): transient failures are retried with
// backoff and then fall back to the next candidate, a failure that is the
// caller's fault (invalid_request, too_large) returns at once, and the
// circuit breakers are the candidates' own, shared with their generation
// calls: an upstream that fails is skipped for both.
//
// Among equal candidates (a Group), the call goes to the one chosen by its
// first input, so a batch sent again lands where it did before; there is
// no prompt cache to keep, so no account scopes it.
//
// A reply whose vector count is not the inputs' is an upstream error (and
// falls back like one). Its usage is bounded as a generation call's is
// (see usage.go): no output, and input at most the inputs' own count (the
// server's, req.InputTokens, or else counted here) with the margin of
// embedBounds.
//
// A reply must answer the call: a vector per input, each of the length
// asked for (of one length among them when none was), of finite numbers;
// any other is an upstream error, and falls back like one.
//
// A route with no Embedder among its candidates answers ErrNoEmbeddings,
// before any attempt.
func (r *Router) Embed(ctx context.Context, t llm.RequestType, tier llm.Tier, req *llm.EmbedRequest) (*llm.Embeddings, Report, error) {
	cands := embedders(r.candidates(t, tier))
	if len(cands) == 0 {
		return nil, Report{}, ErrNoEmbeddings
	}
	var out *llm.Embeddings
	rep, err := r.tryEach(ctx, OperationEmbeddings, r.order(cands, func() uint64 { return embedKey(req) }), func(ctx context.Context, c Candidate) error {
		e, err := c.Backend.(Embedder).Embed(ctx, req)
		if err != nil {
			return err
		}
		if err := checkEmbeddings(req, e); err != nil {
			return err
		}
		e.Usage = checkUsage(r.opts.Logger, c.Name, embedBounds(req), e.Usage)
		out = e
		return nil
	})
	if err != nil {
		return nil, rep, err
	}
	return out, rep, nil
}

// ErrNoEmbeddings is the answer to an embeddings call on a route none of
// whose upstreams serves embeddings (a configuration of Anthropic
// upstreams only, say): the endpoint is not offered.
var ErrNoEmbeddings = &llm.Error{Kind: llm.KindNotFound,
	Message: "embeddings are not served here: no upstream this gateway is configured with has an embeddings endpoint"}

// checkEmbeddings refuses a reply that does not answer req (see Embed).
// A reply of text (e.Text, passed through) must be in the caller's form,
// and its numbers were checked finite by the backend as it read them
// (llm.JSONScanner.Float32ArrayText, llm.CheckBase64Vector).
func checkEmbeddings(req *llm.EmbedRequest, e *llm.Embeddings) error {
	if e == nil || e.Len() != len(req.Inputs) {
		n := 0
		if e != nil {
			n = e.Len()
		}
		return &llm.Error{Kind: llm.KindUpstream, Message: MsgEmbedCount,
			Err: fmt.Errorf("backend returned %d vectors for %d inputs", n, len(req.Inputs))}
	}
	want := req.Dimensions
	if e.Text != nil {
		if e.Wire != req.Wire || e.Wire == llm.WireNone {
			return &llm.Error{Kind: llm.KindUpstream, Message: MsgMalformed,
				Err: fmt.Errorf("backend returned vectors as text of form %d for a caller of form %d", e.Wire, req.Wire)}
		}
		if want == 0 {
			want = e.Dims
		}
		if e.Dims != want || e.Dims <= 0 {
			msg := MsgMalformed
			if e.Dims < want && e.Dims > 0 {
				msg = MsgEmbedShort
			}
			return &llm.Error{Kind: llm.KindUpstream, Message: msg,
				Err: fmt.Errorf("backend returned vectors of %d dimensions, want %d", e.Dims, want)}
		}
		return nil
	}
	for i, v := range e.Vectors {
		if want == 0 {
			want = len(v)
		}
		if len(v) != want || len(v) == 0 {
			msg := MsgMalformed
			if len(v) < want {
				msg = MsgEmbedShort
			}
			return &llm.Error{Kind: llm.KindUpstream, Message: msg,
				Err: fmt.Errorf("backend returned vector %d of %d dimensions, want %d", i, len(v), want)}
		}
		for _, f := range v {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return &llm.Error{Kind: llm.KindUpstream, Message: MsgMalformed,
					Err: fmt.Errorf("backend returned vector %d holding %v", i, f)}
			}
		}
	}
	return nil
}

// embedders returns the candidates whose backend serves embeddings.
func embedders(cands []Candidate) []Candidate {
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if _, ok := c.Backend.(Embedder); ok {
			out = append(out, c)
		}
	}
	return out
}

// embedKeyBytes is how much of the first input embedKey hashes.
const embedKeyBytes = 1 << 10

// embedKey is an embeddings call's affinity key: its first input (its
// first KiB), and the number of inputs.
func embedKey(req *llm.EmbedRequest) uint64 {
	h := fnv.New64a()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(req.Inputs)))
	h.Write(n[:])
	if len(req.Inputs) > 0 {
		in := req.Inputs[0]
		h.Write([]byte(in.Text[:min(len(in.Text), embedKeyBytes)]))
		for _, id := range in.Tokens[:min(len(in.Tokens), embedKeyBytes/4)] {
			binary.LittleEndian.PutUint64(n[:], uint64(id))
			h.Write(n[:])
		}
	}
	return h.Sum64()
}

// inputPerEmbedInput is the framing an upstream may add to each input of
// an embeddings call (a model's start and end tokens, an instruction
// prefix), beyond inputOverhead for the call.
const inputPerEmbedInput = 16

// embedBounds are the usage bounds of an embeddings call: no output, and
// input at svcgw's count of the inputs (req.InputTokens, or else counted
// here: llm.TextTokens for a text, the ids for a token input) with the
// margin of a prompt's text, the call's overhead and a little framing per
// input. A model's context length bounds each input, not the batch, so it
// does not bound the call.
func embedBounds(req *llm.EmbedRequest) usageBounds {
	counted := req.InputTokens
	if counted <= 0 {
		for _, in := range req.Inputs {
			counted += len(in.Tokens)
			if in.Text != "" {
				counted += llm.TextTokens(in.Text)
			}
		}
	}
	in := counted*inputTextFactor + inputOverhead + len(req.Inputs)*inputPerEmbedInput
	return usageBounds{input: min(max(in, 0), maxUsageTokens)}
}
