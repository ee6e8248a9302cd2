package openai

import (
	"context"
	"errors"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Embeddings over the protocol's /embeddings endpoint (OpenAI's, and every
// compatible server's: vLLM, llama.cpp's server, Ollama, Hugging Face
// TEI).
//
//   - input is always an array: of strings, or of token-id arrays when the
//     caller sent token ids (one call cannot mix the two: the protocol
//     has no such input).
//   - encoding_format is the caller's when it called in OpenAI's shape
//     (llm.WireOpenAIBase64: "base64", the official SDKs' default), else
//     "float". A reply in the caller's form is passed through as text,
//     checked (scanVector); a server that ignores the field and answers
//     in the other form is read all the same, and its vectors converted.
//   - dimensions goes upstream when asked; vectors longer than asked are
//     cut and re-normalised (protocol.FitDimensions).
//   - The vectors are put in input order by each item's index (a server
//     that sends no index at all is read in list order).
//   - usage.prompt_tokens is the call's input; a server that reports none
//     leaves it 0, and the server charges its own count.
//   - A call of more than embedBatch inputs (or HTTPOptions.EmbedBatch,
//     when smaller) goes upstream as several requests
//     (protocol.EmbedBatches).

var _ upstream.Embedder = (*Backend)(nil)

// embedBatch is the most inputs one request carries: OpenAI's limit is
// 2,048, but a reply of 2,048 vectors of 3,072 floats as JSON text
// (~14 bytes a float) would pass the cap on a reply's size, and smaller
// requests go out in parallel.
const embedBatch = 512

type oaEmbedRequest struct {
	Model string `json:"model"`
	// Input is a []string or a [][]int.
	Input          any    `json:"input"`
	Dimensions     int    `json:"dimensions,omitempty"`
	EncodingFormat string `json:"encoding_format"`
	User           string `json:"user,omitempty"`
}

type oaEmbedResponse struct {
	Data  []oaEmbedItem `json:"data"`
	Usage *oaEmbedUsage `json:"usage"`
	Error *oaErrorBody  `json:"error"`
}

type oaEmbedItem struct {
	Index     *int     `json:"index"`
	Embedding oaVector `json:"embedding"`
	// text is the embedding as the reply wrote it, checked, when it is
	// in the caller's form (the scanner's, never the decoder's); count
	// is how many values it holds.
	text  []byte
	count int
}

type oaEmbedUsage struct {
	PromptTokens int `json:"prompt_tokens"`
}

// oaVector is an embedding: an array of floats, or the base64 of its
// little-endian float32 values.
type oaVector []float32

func (v *oaVector) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := jsonv1.Unmarshal(b, &s); err != nil {
			return err
		}
		f, err := protocol.DecodeBase64Vector(s)
		*v = f
		return err
	}
	return jsonv1.Unmarshal(b, (*[]float32)(v))
}

// Embed sends req upstream and returns one vector per input, in order.
func (b *Backend) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
	tokens, err := embedTokens(req.Inputs)
	if err != nil {
		return nil, err
	}
	out, err := protocol.EmbedBatches(ctx, len(req.Inputs), b.h.EmbedBatch(embedBatch), func(ctx context.Context, lo, hi int) (protocol.EmbedBatch, error) {
		return b.embed(ctx, req, req.Inputs[lo:hi], tokens)
	})
	if err != nil {
		return nil, err
	}
	if err := protocol.FitEmbeddings(out, req.Dimensions); err != nil {
		return nil, err
	}
	return out, nil
}

// embedTokens reports whether the inputs are token ids; a mix of text and
// token ids is refused.
func embedTokens(in []llm.EmbedInput) (bool, error) {
	tokens := len(in) > 0 && in[0].Tokens != nil
	for i := range in {
		if (in[i].Tokens != nil) != tokens {
			return false, llm.InvalidParam("input", "input must be all text or all token ids")
		}
	}
	return tokens, nil
}

// embed is one upstream request, for the inputs in.
func (b *Backend) embed(ctx context.Context, req *llm.EmbedRequest, in []llm.EmbedInput, tokens bool) (protocol.EmbedBatch, error) {
	r := oaEmbedRequest{Model: b.h.Opts.Model, Dimensions: req.Dimensions, EncodingFormat: "float", User: req.User}
	if req.Wire == llm.WireOpenAIBase64 {
		r.EncodingFormat = "base64"
	}
	if tokens {
		ids := make([][]int, len(in))
		for i := range in {
			ids[i] = in[i].Tokens
		}
		r.Input = ids
	} else {
		texts := make([]string, len(in))
		for i := range in {
			texts[i] = in[i].Text
		}
		r.Input = texts
	}
	body, err := protocol.EncodeJSON(r)
	if err != nil {
		return protocol.EmbedBatch{}, err
	}
	raw, err := b.h.PostRead(ctx, b.embedURL, b.hdr.Call, body)
	if err != nil {
		return protocol.EmbedBatch{}, err
	}
	return embedReply(raw, req.Wire)
}

// embedReply reads an embeddings reply: its vectors by index, and its
// usage. Vectors in the form wire are kept as text when the scanner read
// the reply (all of them, or else none).
func embedReply(raw []byte, wire llm.EmbedWire) (protocol.EmbedBatch, error) {
	// The scanner reads the usual reply (scanEmbedReply), floats about 4
	// times faster than the decoder (BenchmarkEmbedReply, bench/RESULTS.md),
	// whose answer counts for anything else.
	var resp oaEmbedResponse
	var sc protocol.Scanner
	if !scanEmbedReply(&sc, raw, &resp, wire) {
		resp = oaEmbedResponse{}
		if err := jsonv1.Unmarshal(raw, &resp); err != nil {
			return protocol.EmbedBatch{}, upstream.Malformed(err)
		}
	}
	if resp.Error != nil {
		return protocol.EmbedBatch{}, resp.Error.llmError(raw)
	}
	var out protocol.EmbedBatch
	if resp.Usage != nil {
		out.Tokens = resp.Usage.PromptTokens
	}
	text := len(resp.Data) > 0
	for i := range resp.Data {
		text = text && resp.Data[i].text != nil
	}
	if text {
		out.Text, out.Counts, out.Wire = make([][]byte, len(resp.Data)), make([]int, len(resp.Data)), wire
	} else {
		out.Vectors = make([][]float32, len(resp.Data))
	}
	indexed := len(resp.Data) > 0 && resp.Data[0].Index != nil
	for i := range resp.Data {
		d := &resp.Data[i]
		at := i
		if indexed {
			if d.Index == nil {
				return protocol.EmbedBatch{}, upstream.Malformed(errors.New("an embedding without an index among indexed ones"))
			}
			at = *d.Index
		}
		if at < 0 || at >= len(resp.Data) || text && out.Text[at] != nil || !text && out.Vectors[at] != nil {
			return protocol.EmbedBatch{}, upstream.Malformed(fmt.Errorf("embedding index %d out of range or repeated (%d embeddings)", at, len(resp.Data)))
		}
		switch {
		case text:
			out.Text[at], out.Counts[at] = d.text, d.count
		case d.text != nil: // among vectors of the other form: converted
			v, err := llm.DecodeEmbedText(wire, d.text)
			if err != nil {
				return protocol.EmbedBatch{}, upstream.Malformed(err)
			}
			out.Vectors[at] = v
		default:
			out.Vectors[at] = d.Embedding
		}
	}
	return out, nil
}
