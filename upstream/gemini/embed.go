package gemini

import (
	"context"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Embeddings over the protocol's models/{model}:embedContent (one input)
// and :batchEmbedContents (several), as the Gemini API reference and
// google.golang.org/genai send them.
//
//   - Each input is one user content of one text part (the role as the Go
//     SDK sends it; the protocol does not require it); the call's taskType,
//     title and outputDimensionality go with every input (every request of
//     a batch names the model, "models/{model}", as the protocol
//     requires).
//   - Token ids cannot be sent: the protocol takes text only, and the call
//     fails as invalid_request.
//   - The Gemini API reports no usage for embeddings; a reply that carries
//     usageMetadata.promptTokenCount (as Vertex AI's does) is billed by
//     it, and otherwise the usage is 0 and the server charges its own
//     count.
//   - outputDimensionality truncates the model's vector, which the
//     protocol does not re-normalise (Google documents normalising
//     shortened vectors as the caller's job); the vectors are returned as
//     sent. One longer than asked is cut and re-normalised
//     (protocol.FitDimensions).
//   - A caller in Gemini's shape (llm.WireGeminiValues) gets each vector's
//     values as the upstream wrote them, checked (scanEmbedding), not
//     parsed and formatted again; any other caller gets them parsed.
//   - A call of more than embedBatch inputs (or HTTPOptions.EmbedBatch,
//     when smaller) goes upstream as several batches
//     (protocol.EmbedBatches).

var _ upstream.Embedder = (*Backend)(nil)

// embedBatch is the most requests batchEmbedContents takes in one call.
const embedBatch = 100

type gmEmbedRequest struct {
	Model                string    `json:"model"`
	Content              gmContent `json:"content"`
	TaskType             string    `json:"taskType,omitempty"`
	Title                string    `json:"title,omitempty"`
	OutputDimensionality int       `json:"outputDimensionality,omitempty"`
}

type gmBatchEmbedRequest struct {
	Requests []gmEmbedRequest `json:"requests"`
}

type gmEmbedding struct {
	Values []float32 `json:"values"`
	// text is values as the reply wrote them, checked, for a caller in
	// Gemini's shape (the scanner's, never the decoder's); count is how
	// many numbers it holds.
	text  []byte
	count int
}

// gmEmbedResponse is the reply of either method: embedding for
// embedContent, embeddings for batchEmbedContents.
type gmEmbedResponse struct {
	Embedding     *gmEmbedding  `json:"embedding"`
	Embeddings    []gmEmbedding `json:"embeddings"`
	UsageMetadata *gmEmbedUsage `json:"usageMetadata"`
	Error         *gmErrorBody  `json:"error"`
}

type gmEmbedUsage struct {
	PromptTokenCount int `json:"promptTokenCount"`
}

// Embed sends req upstream and returns one vector per input, in order.
func (b *Backend) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error) {
	for i := range req.Inputs {
		if req.Inputs[i].Tokens != nil {
			return nil, llm.InvalidParam("input", "token-id inputs cannot be embedded on this route; send text")
		}
	}
	out, err := protocol.EmbedBatches(ctx, len(req.Inputs), b.h.EmbedBatch(embedBatch), func(ctx context.Context, lo, hi int) (protocol.EmbedBatch, error) {
		return b.embed(ctx, req, req.Inputs[lo:hi])
	})
	if err != nil {
		return nil, err
	}
	if err := protocol.FitEmbeddings(out, req.Dimensions); err != nil {
		return nil, err
	}
	return out, nil
}

// embed is one upstream request, for the inputs in: embedContent for one,
// batchEmbedContents for more.
func (b *Backend) embed(ctx context.Context, req *llm.EmbedRequest, in []llm.EmbedInput) (protocol.EmbedBatch, error) {
	one := func(text string) gmEmbedRequest {
		return gmEmbedRequest{
			Model:                b.modelName,
			Content:              gmContent{Role: "user", Parts: []gmPart{{Text: text}}},
			TaskType:             req.TaskType,
			Title:                req.Title,
			OutputDimensionality: req.Dimensions,
		}
	}
	var v any
	url := b.embedURL
	if len(in) == 1 {
		v = one(in[0].Text)
	} else {
		batch := gmBatchEmbedRequest{Requests: make([]gmEmbedRequest, len(in))}
		for i := range in {
			batch.Requests[i] = one(in[i].Text)
		}
		v, url = batch, b.batchEmbedURL
	}
	body, err := protocol.EncodeJSON(v)
	if err != nil {
		return protocol.EmbedBatch{}, err
	}
	raw, err := b.h.PostRead(ctx, url, b.hdr.Call, body)
	if err != nil {
		return protocol.EmbedBatch{}, err
	}
	return embedReply(raw, req.Wire)
}

// embedReply reads the reply of either method: its vectors in order, and
// its usage if it has any. The scanner reads the usual reply
// (scanEmbedReply); the decoder's answer counts for anything else.
func embedReply(raw []byte, wire llm.EmbedWire) (protocol.EmbedBatch, error) {
	var resp gmEmbedResponse
	var sc protocol.Scanner
	if !scanEmbedReply(&sc, raw, &resp, wire == llm.WireGeminiValues) {
		resp = gmEmbedResponse{}
		if err := jsonv1.Unmarshal(raw, &resp); err != nil {
			return protocol.EmbedBatch{}, upstream.Malformed(err)
		}
	}
	if resp.Error != nil {
		return protocol.EmbedBatch{}, resp.Error.llmError(raw)
	}
	var out protocol.EmbedBatch
	all := resp.Embeddings
	if resp.Embedding != nil {
		all = append([]gmEmbedding{*resp.Embedding}, all...)
	}
	text := len(all) > 0
	for i := range all {
		text = text && all[i].text != nil
	}
	for i := range all {
		switch e := &all[i]; {
		case text:
			out.Text, out.Counts = append(out.Text, e.text), append(out.Counts, e.count)
			out.Wire = wire
		case e.text != nil:
			v, err := llm.DecodeEmbedText(wire, e.text)
			if err != nil {
				return protocol.EmbedBatch{}, upstream.Malformed(err)
			}
			out.Vectors = append(out.Vectors, v)
		default:
			out.Vectors = append(out.Vectors, e.Values)
		}
	}
	if resp.UsageMetadata != nil {
		out.Tokens = resp.UsageMetadata.PromptTokenCount
	}
	return out, nil
}
