// Package embedrecorder is a recording embeddings upstream over real HTTP,
// speaking both protocols svcgw embeds through as the vendors answer them:
// OpenAI's POST /v1/embeddings (usage reported, floats or base64 as asked)
// and Gemini's :embedContent and :batchEmbedContents (no usage, vectors
// of outputDimensionality values). It keeps every request it receives
// and the reply it sent. The gateway's end-to-end tests and the Node
// client run of scripts/clients (through scripts/clients/embedup) use it,
// so that both check svcgw against the same upstream.
package embedrecorder

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
)

// Markers a real upstream sends in its reply headers and body, which must
// never reach a caller of svcgw.
const (
	Marker          = "upstream-marker-7f3a" // X-Upstream-Id, and the OpenAI reply's id
	MarkerHeader    = "X-Upstream-Id"
	ModelHeader     = "Openai-Model" // as OpenAI names its model in a header
	OpenAIDefault   = 1536           // text-embedding-3-small's vector when no dimensions are asked
	GeminiDefault   = 3072           // gemini-embedding-001's vector when no outputDimensionality is asked
	maxRecordedBody = 1 << 24
)

// Request is one request the upstream received, with the reply it sent.
type Request struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
	Status int         `json:"status"`
	Reply  string      `json:"reply"`
}

// Recorder is the upstream's handler. The zero value answers with
// Vector's vectors and reports no usage on the OpenAI protocol.
type Recorder struct {
	// PromptTokens is the usage.prompt_tokens the OpenAI protocol reports
	// for a request (Gemini's reports none).
	PromptTokens int
	// OpenAIModel is the model the OpenAI protocol names in its reply and
	// its Openai-Model header; empty, the request's.
	OpenAIModel string
	// Vector is the i-th input's vector of dims values (dims is the
	// requested size, else the protocol's default); nil, Vector below.
	Vector func(i, dims int) []float32
	// IgnoreFormat answers floats whatever encoding_format asks, as some
	// OpenAI-compatible servers do; else "base64" is answered as OpenAI
	// does.
	IgnoreFormat bool

	mu   sync.Mutex
	reqs []Request
}

// Vector is the default vector of the i-th input: dims values, each a
// multiple of 1/64 within [-0.5, 0.5], exact in float32 (and so through
// base64) and different for each input and position.
func Vector(i, dims int) []float32 {
	v := make([]float32, dims)
	for j := range v {
		v[j] = float32((i+1)*(j+3)%65-32) / 64
	}
	return v
}

func (rec *Recorder) vector(i, dims int) []float32 {
	if rec.Vector != nil {
		return rec.Vector(i, dims)
	}
	return Vector(i, dims)
}

// ServeHTTP answers an embeddings request as the vendor does, and records
// it. Anything else is a 404.
func (rec *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
	status, reply := rec.answer(w, r, body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, Request{r.Method, r.URL.Path, r.Header.Clone(), string(body), status, string(reply)})
	rec.mu.Unlock()
	w.WriteHeader(status)
	_, _ = w.Write(reply)
}

func (rec *Recorder) answer(w http.ResponseWriter, r *http.Request, body []byte) (int, []byte) {
	w.Header().Set(MarkerHeader, Marker)
	w.Header().Set("Content-Type", "application/json")
	bad := func(err error) (int, []byte) {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 400, "message": err.Error(), "status": "INVALID_ARGUMENT"}})
		return http.StatusBadRequest, b
	}
	if r.Method != http.MethodPost {
		return http.StatusNotFound, []byte(`{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`)
	}
	switch {
	case r.URL.Path == "/v1/embeddings":
		var req struct {
			Model          string          `json:"model"`
			Input          json.RawMessage `json:"input"`
			Dimensions     int             `json:"dimensions"`
			EncodingFormat string          `json:"encoding_format"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		n, err := countInputs(req.Input)
		if err != nil {
			return bad(err)
		}
		dims := req.Dimensions
		if dims == 0 {
			dims = OpenAIDefault
		}
		model := rec.OpenAIModel
		if model == "" {
			model = req.Model
		}
		w.Header().Set(ModelHeader, model)
		data := make([]map[string]any, n)
		for i := range data {
			v := rec.vector(i, dims)
			var emb any = v
			if req.EncodingFormat == "base64" && !rec.IgnoreFormat {
				emb = Base64(v)
			}
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
		}
		b, _ := json.Marshal(map[string]any{"object": "list", "data": data, "model": model, "id": Marker,
			"usage": map[string]int{"prompt_tokens": rec.PromptTokens, "total_tokens": rec.PromptTokens}})
		return http.StatusOK, b
	case strings.HasSuffix(r.URL.Path, ":embedContent"):
		var req struct {
			OutputDimensionality int `json:"outputDimensionality"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		b, _ := json.Marshal(map[string]any{"embedding": map[string]any{"values": rec.vector(0, geminiDims(req.OutputDimensionality))}})
		return http.StatusOK, b
	case strings.HasSuffix(r.URL.Path, ":batchEmbedContents"):
		var req struct {
			Requests []struct {
				OutputDimensionality int `json:"outputDimensionality"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		embs := make([]map[string]any, len(req.Requests))
		for i, er := range req.Requests {
			embs[i] = map[string]any{"values": rec.vector(i, geminiDims(er.OutputDimensionality))}
		}
		b, _ := json.Marshal(map[string]any{"embeddings": embs})
		return http.StatusOK, b
	}
	return http.StatusNotFound, []byte(`{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`)
}

// Base64 is v as OpenAI's encoding_format "base64" writes it: the
// float32 values, little-endian, in standard base64.
func Base64(v []float32) string {
	raw := make([]byte, 4*len(v))
	for j, x := range v {
		binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

func geminiDims(d int) int {
	if d == 0 {
		return GeminiDefault
	}
	return d
}

// countInputs is how many inputs an OpenAI input holds: a string or an
// array of token ids is one, an array of strings or of token arrays one
// each.
func countInputs(raw json.RawMessage) (int, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return 1, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, err
	}
	if len(list) > 0 && len(list[0]) > 0 && list[0][0] != '"' && list[0][0] != '[' {
		return 1, nil // one input of token ids
	}
	return len(list), nil
}

// Take returns the requests received since the last Take, and forgets
// them.
func (rec *Recorder) Take() []Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := rec.reqs
	rec.reqs = nil
	return r
}
