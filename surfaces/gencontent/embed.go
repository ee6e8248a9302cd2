package gencontent

import (
	"net/http"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// MaxBatchEmbed is the most requests one batchEmbedContents call takes
// (the API refuses more: "at most 100 requests can be in one batch").
const MaxBatchEmbed = 100

// DefaultEmbedDimensions is the length of a vector when the caller asks
// for none and the backend has no default of its own (the fixture).
const DefaultEmbedDimensions = 768

// embedContentRequest is an EmbedContentRequest: an embedContent body, and
// one request of a batchEmbedContents body.
type embedContentRequest struct {
	Model                string   `json:"model"`
	Content              *content `json:"content"`
	TaskType             string   `json:"taskType"`
	Title                string   `json:"title"`
	OutputDimensionality *int     `json:"outputDimensionality"`
}

// batchEmbedRequest is a batchEmbedContents body.
type batchEmbedRequest struct {
	Requests []embedContentRequest `json:"requests"`
}

// taskTypes are the TaskType values the API takes.
var taskTypes = []string{"TASK_TYPE_UNSPECIFIED", "RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY",
	"CLASSIFICATION", "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY"}

var _ surface.EmbedCodec = Codec{}

// DecodeEmbed decodes an embedContent or batchEmbedContents body (the
// method is the path's). The model is the path's; a batch's requests may
// name one each, which is intent only, like the path's. A batch is one
// call: its requests must agree on taskType, title and
// outputDimensionality (as the Gen AI SDKs' EmbedContent sends them),
// since svcgw embeds it upstream as one call.
func (Codec) DecodeEmbed(r *http.Request, body []byte) (*llm.EmbedRequest, surface.EmbedReply, error) {
	model, method, err := ParseModelMethod(r.PathValue("rest"))
	if err != nil {
		return nil, nil, err
	}
	var reqs []embedContentRequest
	prefix := ""
	if method == MethodBatchEmbed {
		var b batchEmbedRequest
		if err := unmarshal(body, &b, ""); err != nil {
			return nil, nil, err
		}
		switch {
		case len(b.Requests) == 0:
			return nil, nil, llm.InvalidParam("requests", "* BatchEmbedContentsRequest.requests: at least one request is required")
		case len(b.Requests) > MaxBatchEmbed:
			return nil, nil, llm.InvalidParam("requests", "* BatchEmbedContentsRequest.requests: at most %d requests can be in one batch (got %d)", MaxBatchEmbed, len(b.Requests))
		}
		reqs, prefix = b.Requests, "requests[]."
	} else {
		var one embedContentRequest
		if err := unmarshal(body, &one, ""); err != nil {
			return nil, nil, err
		}
		reqs = []embedContentRequest{one}
	}
	out := &llm.EmbedRequest{Model: model, Inputs: make([]llm.EmbedInput, len(reqs)), DefaultDimensions: DefaultEmbedDimensions}
	first := &reqs[0]
	for i := range reqs {
		er := &reqs[i]
		text, err := embedText(er.Content, prefix)
		if err != nil {
			return nil, nil, err
		}
		out.Inputs[i].Text = text
		if er.TaskType != "" && !contains(taskTypes, er.TaskType) {
			return nil, nil, llm.InvalidParam(prefix+"taskType", "Invalid value at '%staskType' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), %s", prefix, quote(er.TaskType))
		}
		if er.OutputDimensionality != nil {
			if d := *er.OutputDimensionality; d < 1 || d > surface.MaxEmbedDimensions {
				return nil, nil, llm.InvalidParam(prefix+"outputDimensionality", "* %soutputDimensionality: must be from 1 to %d, got %d", prefix, surface.MaxEmbedDimensions, d)
			}
		}
		if er.TaskType != first.TaskType || er.Title != first.Title || !sameInt(er.OutputDimensionality, first.OutputDimensionality) {
			return nil, nil, llm.InvalidParam("requests", "* BatchEmbedContentsRequest.requests: every request of a batch must have the same taskType, title and outputDimensionality (request %d differs from the first); send requests that differ in separate calls", i)
		}
	}
	if err := checkEmbedInputTokens(out, prefix); err != nil {
		return nil, nil, err
	}
	out.TaskType, out.Title = first.TaskType, first.Title
	if first.OutputDimensionality != nil {
		out.Dimensions = *first.OutputDimensionality
	}
	return out, embedReply{batch: method == MethodBatchEmbed}, nil
}

// embedText is the text a content embeds: its text parts, joined by a
// newline when there are several. Only text can be embedded here.
func embedText(c *content, prefix string) (string, error) {
	if c == nil || len(c.Parts) == 0 {
		return "", llm.InvalidParam(prefix+"content", "* %scontent: the content to embed is required, with at least one text part", prefix)
	}
	texts := make([]string, 0, len(c.Parts))
	for _, p := range c.Parts {
		if p.InlineData != nil || p.FileData != nil || p.FunctionCall != nil || p.FunctionResponse != nil ||
			p.ExecutableCode != nil || p.CodeExecutionResult != nil {
			return "", llm.InvalidParam(prefix+"content.parts", "* %scontent.parts: only text parts can be embedded", prefix)
		}
		texts = append(texts, p.Text)
	}
	text := strings.Join(texts, "\n")
	if strings.TrimSpace(text) == "" {
		return "", llm.InvalidParam(prefix+"content.parts", "* %scontent.parts: the text to embed is empty", prefix)
	}
	return text, nil
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// embedReply writes an EmbedContentResponse ({embedding: {values}}) or a
// BatchEmbedContentsResponse ({embeddings: [{values}]}).
// A vector a Gemini upstream sent (resp.Text) is written as it came; any
// other is written from its values.
type embedReply struct{ batch bool }

// Wire is the form the reply writes vectors in: Gemini's values.
func (embedReply) Wire() llm.EmbedWire { return llm.WireGeminiValues }

// WriteEmbeddings writes resp; the model is not part of the reply.
func (e embedReply) WriteEmbeddings(w http.ResponseWriter, _ string, resp *llm.Embeddings) error {
	if err := surface.EmbedText(resp, e.Wire()); err != nil {
		return err
	}
	return surface.WriteJSON(w, http.StatusOK, embedValues{e.batch, resp})
}

// embedValues is the reply's body, written without reflection.
type embedValues struct {
	batch bool
	resp  *llm.Embeddings
}

// JSONSize bounds the reply's length (surface.JSONSizer).
func (e embedValues) JSONSize() int { return surface.VectorsSize(e.resp, false, 16) + 32 }

func (e embedValues) AppendJSON(b []byte) []byte {
	if !e.batch {
		b = append(b, `{"embedding":{"values":`...)
		b = surface.AppendVector(b, e.resp, 0)
		return append(b, "}}"...)
	}
	b = append(b, `{"embeddings":[`...)
	for i := range e.resp.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"values":`...)
		b = surface.AppendVector(b, e.resp, i)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
