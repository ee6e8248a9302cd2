package chat

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// OpenAI's bounds on one embeddings request (the API reference of
// POST /v1/embeddings): inputs per request, tokens per input, and tokens
// summed over the inputs. svcgw counts a text's tokens with its estimator
// (llm.TextTokens), token ids one each.
const (
	MaxEmbedInputs      = 2048
	MaxEmbedInputTokens = 8192
	MaxEmbedTotalTokens = 300_000
)

// DefaultEmbedDimensions is the length of a vector when the caller asks
// for none and the backend has no default of its own (the fixture):
// text-embedding-3-small's.
const DefaultEmbedDimensions = 1536

// embedRequest is an embeddings request body.
type embedRequest struct {
	Model          *string    `json:"model"`
	Input          embedInput `json:"input"`
	Dimensions     *int       `json:"dimensions"`
	EncodingFormat string     `json:"encoding_format"`
	User           string     `json:"user"`
}

// embedInput is input's union: a string, an array of strings, an array
// of token ids, or an array of arrays of token ids. set records that the
// member was present.
type embedInput struct {
	in  []llm.EmbedInput
	set bool
}

func (e *embedInput) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case '"':
		var s string
		if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		e.in, e.set = []llm.EmbedInput{{Text: s}}, true
		return nil
	case '[':
	default:
		return surface.WrongKind(dec, "a string, an array of strings, an array of integers or an array of arrays of integers")
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	e.set = true
	var texts []string
	if jsonv2.Unmarshal(v, &texts) == nil {
		e.in = make([]llm.EmbedInput, len(texts))
		for i, s := range texts {
			e.in[i].Text = s
		}
		return nil
	}
	var tokens []int
	if jsonv2.Unmarshal(v, &tokens) == nil {
		if tokens == nil {
			tokens = []int{}
		}
		e.in = []llm.EmbedInput{{Tokens: tokens}}
		return nil
	}
	var batches [][]int
	if jsonv2.Unmarshal(v, &batches) == nil {
		e.in = make([]llm.EmbedInput, len(batches))
		for i, t := range batches {
			if t == nil {
				t = []int{}
			}
			e.in[i].Tokens = t
		}
		return nil
	}
	return llm.InvalidParam("input", "input must be a string, an array of strings, an array of integers or an array of arrays of integers")
}

var _ surface.EmbedCodec = Codec{}

// DecodeEmbed decodes an embeddings request body, within OpenAI's bounds.
func (Codec) DecodeEmbed(_ *http.Request, body []byte) (*llm.EmbedRequest, surface.EmbedReply, error) {
	var er embedRequest
	if err := surface.Decode(body, &er, surface.EncodingJSON); err != nil {
		return nil, nil, decodeError(err)
	}
	if er.Model == nil || *er.Model == "" {
		return nil, nil, llm.InvalidParam("model", "model is required")
	}
	if !er.Input.set {
		return nil, nil, llm.InvalidParam("input", "input is required")
	}
	req := &llm.EmbedRequest{Model: *er.Model, Inputs: er.Input.in, User: er.User, DefaultDimensions: DefaultEmbedDimensions}
	if err := checkEmbedInputs(req.Inputs); err != nil {
		return nil, nil, err
	}
	if er.Dimensions != nil {
		if d := *er.Dimensions; d < 1 || d > surface.MaxEmbedDimensions {
			return nil, nil, llm.InvalidParam("dimensions", "Invalid 'dimensions': expected a value from 1 to %d, but got %d instead.", surface.MaxEmbedDimensions, d)
		}
		req.Dimensions = *er.Dimensions
	}
	reply := embedReply{}
	switch er.EncodingFormat {
	case "", "float":
	case "base64":
		reply.base64 = true
	default:
		return nil, nil, llm.InvalidParam("encoding_format", "Invalid 'encoding_format': expected 'float' or 'base64', but got %q instead.", er.EncodingFormat)
	}
	return req, reply, nil
}

// checkEmbedInputs holds the inputs to OpenAI's bounds: at least one and
// at most MaxEmbedInputs, none empty, each within MaxEmbedInputTokens and
// all within MaxEmbedTotalTokens, token ids non-negative.
func checkEmbedInputs(ins []llm.EmbedInput) error {
	if len(ins) == 0 {
		return llm.InvalidParam("input", "input must not be an empty array")
	}
	if len(ins) > MaxEmbedInputs {
		return llm.InvalidParam("input", "input holds %d inputs; an embeddings request takes at most %d: split it into several requests", len(ins), MaxEmbedInputs)
	}
	total := 0
	for i, in := range ins {
		if in.Text == "" && len(in.Tokens) == 0 {
			return llm.InvalidParam("input", "input[%d] is empty: every input must have at least one character or token", i)
		}
		for _, t := range in.Tokens {
			if t < 0 || t > math.MaxInt32 {
				return llm.InvalidParam("input", "input[%d] holds the token id %d, which is not a token id", i, t)
			}
		}
		n := in.TokenCount()
		if n > MaxEmbedInputTokens {
			return llm.InvalidParam("input", "input[%d] is %d tokens long; an embedding input takes at most %d tokens", i, n, MaxEmbedInputTokens)
		}
		total += n
	}
	if total > MaxEmbedTotalTokens {
		return llm.InvalidParam("input", "the inputs are %d tokens long together; an embeddings request takes at most %d tokens in all: split it into several requests", total, MaxEmbedTotalTokens)
	}
	return nil
}

// embedReply writes the reply: {object: "list", data: [{object:
// "embedding", index, embedding}], model, usage}, each vector an array of
// floats or, with encoding_format base64, the base64 of its float32s in
// little-endian order (what OpenAI sends, and the SDKs decode).
// A vector the upstream sent in the caller's form (resp.Text: an
// OpenAI-protocol upstream asked for the caller's encoding_format) is
// written as it came; any other is written from its values.
type embedReply struct{ base64 bool }

// Wire is the form the reply writes vectors in.
func (e embedReply) Wire() llm.EmbedWire {
	if e.base64 {
		return llm.WireOpenAIBase64
	}
	return llm.WireOpenAIFloats
}

// WriteEmbeddings writes resp.
func (e embedReply) WriteEmbeddings(w http.ResponseWriter, model string, resp *llm.Embeddings) error {
	if err := surface.EmbedText(resp, e.Wire()); err != nil {
		return err
	}
	return surface.WriteJSON(w, http.StatusOK, embedList{e, model, resp})
}

// embedList is the reply's body, written without reflection: a vector of
// 1,536 floats is most of it.
type embedList struct {
	embedReply
	model string
	resp  *llm.Embeddings
}

// JSONSize bounds the reply's length (surface.JSONSizer).
func (l embedList) JSONSize() int {
	return surface.VectorsSize(l.resp, l.base64, 64) + 2*len(l.model) + 128
}

func (l embedList) AppendJSON(b []byte) []byte {
	b = append(b, `{"object":"list","data":[`...)
	var raw []byte
	for i := range l.resp.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		switch {
		case l.base64 && l.resp.Text != nil:
			b = append(b, '"')
			b = append(b, l.resp.Text[i]...)
			b = append(b, '"')
		case l.base64:
			raw = raw[:0]
			for _, f := range l.resp.Vectors[i] {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		default:
			b = surface.AppendVector(b, l.resp, i)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = surface.AppendString(b, l.model, false)
	n := strconv.Itoa(l.resp.Usage.InputTokens)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = append(b, n...)
	b = append(b, `,"total_tokens":`...)
	b = append(b, n...)
	return append(b, "}}"...)
}
