package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/openai"
)

// Fake upstreams for the end-to-end matrix: httptest servers that speak the
// real vendor formats (docs/wire/*.md, upstream/*/testdata/), stateless and
// driven by the request they get:
//
//   - tools offered and the last turn is not a tool result → one tool call,
//     with arguments generated from the first tool's schema;
//   - the last turn is a tool result → text quoting the result;
//   - a schema asked for in the vendor's native form → a JSON object;
//   - otherwise → mxText.
//
// Every reply carries the canary: the backend model name, upstream ids,
// system_fingerprint, vendor headers and error messages all contain
// "canary", so that a test can prove none of it reaches a caller. Helpers
// carry an mx prefix.

const (
	mxCanary      = "canary"
	mxCanaryModel = "canary-model-x7"
	mxText        = "Paris is the capital of France."
	// Every fake reply reports this usage, so each surface can be checked
	// for the exact numbers in its own usage shape. The input is within
	// what any prompt may report (upstream bounds it at twice svcgw's
	// count of the prompt plus 1,024).
	mxInputTokens  = 1012
	mxOutputTokens = 56
)

// mxProto is an upstream protocol.
type mxProto string

const (
	mxOpenAI    mxProto = "openai"
	mxAnthropic mxProto = "anthropic"
	mxGemini    mxProto = "gemini"
)

var mxProtos = []mxProto{mxOpenAI, mxAnthropic, mxGemini}

// mxFailure scripts how a fake fails.
type mxFailure struct {
	Status    int  // answer with this HTTP status and the vendor's error body
	MidStream bool // a stream sends two text frames, then the vendor's error frame
	// ErrorFirst: a stream answers 200 and sends the vendor's error frame
	// before anything else (upstream/openai/testdata/error_first.sse).
	ErrorFirst bool
	Hang       bool // a stream sends two text frames, then waits for the caller to go away
	Times      int  // how many calls fail before the fake recovers; 0: all of them
}

// mxRecorded is one request a fake got.
type mxRecorded struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// mxFake is one fake upstream.
type mxFake struct {
	proto mxProto
	srv   *httptest.Server
	hits  atomic.Int64

	mu      sync.Mutex
	reqs    []mxRecorded
	failure *mxFailure
	failed  int

	// canceled is closed when a hanging stream's handler sees its request
	// context done: the gateway cancelled the upstream call.
	canceled   chan struct{}
	cancelOnce sync.Once
}

func newMXFake(t *testing.T, proto mxProto) *mxFake {
	t.Helper()
	f := &mxFake{proto: proto, canceled: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// backend is an upstream client of the fake's protocol pointed at it.
func (f *mxFake) backend() upstream.Backend {
	o := upstream.HTTPOptions{
		APIKey: "sk-canary-upstream-key",
		Model:  mxCanaryModel,
		Limits: upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 8192},
	}
	switch f.proto {
	case mxOpenAI:
		o.BaseURL = f.srv.URL + "/v1"
		return openai.New(o)
	case mxAnthropic:
		o.BaseURL = f.srv.URL
		return anthropic.New(o)
	}
	o.BaseURL = f.srv.URL
	return gemini.New(o)
}

// candidate is the fake as a router candidate named name.
func (f *mxFake) candidate(name string) upstream.Candidate {
	b := f.backend()
	return upstream.Candidate{Name: name, Backend: b, Limits: upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 8192}}
}

// fail sets how the fake fails from now on; nil heals it.
func (f *mxFake) fail(fl *mxFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failure, f.failed = fl, 0
}

func (f *mxFake) requests() []mxRecorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mxRecorded(nil), f.reqs...)
}

// last is the last request the fake got.
func (f *mxFake) last(t *testing.T) mxRecorded {
	t.Helper()
	rs := f.requests()
	if len(rs) == 0 {
		t.Fatalf("%s fake got no request", f.proto)
	}
	return rs[len(rs)-1]
}

// mxCanaryHeaders are the vendor headers a real upstream sends, each
// naming the backend.
func mxCanaryHeaders(h http.Header) {
	h.Set("Openai-Model", mxCanaryModel)
	h.Set("Openai-Organization", "org-canary")
	h.Set("Openai-Processing-Ms", "canary-417")
	h.Set("Openai-Version", "2020-10-01-canary")
	h.Set("X-Request-Id", "req_canary-id-upstream")
	h.Set("Request-Id", "req_canary-id-upstream")
	h.Set("Anthropic-Ratelimit-Requests-Remaining", "canary-99")
	h.Set("Anthropic-Ratelimit-Tokens-Reset", "canary-2026-01-01T00:00:00Z")
	h.Set("Anthropic-Organization-Id", "canary-org")
	h.Set("X-Ratelimit-Remaining-Requests", "canary-99")
	h.Set("X-Ratelimit-Limit-Tokens", "canary-100000")
	h.Set("X-Canary-Backend", mxCanaryModel)
	h.Set("Server-Timing", "canary;dur=12")
}

// mxTool is a tool the request offered.
type mxTool struct {
	Name   string
	Schema map[string]any
}

// mxTurn is what a fake reads from a request.
type mxTurn struct {
	tools        []mxTool
	result       string // the tool result the last turn holds
	hasResult    bool
	schema       map[string]any // the native structured-output schema
	stream       bool
	includeUsage bool // openai: stream_options.include_usage
}

// mxReply is what a fake answers.
type mxReply struct {
	text     string
	callName string
	callArgs string // JSON object
}

func (r mxReply) call() bool { return r.callName != "" }

func (t mxTurn) reply() mxReply {
	switch {
	case t.hasResult:
		return mxReply{text: "The tool returned " + t.result + "."}
	case len(t.tools) > 0:
		b, _ := json.Marshal(mxGenerate(t.tools[0].Schema))
		return mxReply{callName: t.tools[0].Name, callArgs: string(b)}
	case t.schema != nil:
		b, _ := json.Marshal(mxGenerate(t.schema))
		return mxReply{text: string(b)}
	}
	return mxReply{text: mxText}
}

// mxGenerate returns a value valid against a simple JSON schema: the first
// enum value, "Paris" for strings (an address for format email), the
// minimum (or 1) for numbers, every property of an object, one item for an
// array.
func mxGenerate(s map[string]any) any {
	if s == nil {
		return map[string]any{}
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok {
		for _, v := range ts {
			if v != "null" {
				typ, _ = v.(string)
				break
			}
		}
	}
	switch typ {
	case "object", "":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			ps, _ := v.(map[string]any)
			out[k] = mxGenerate(ps)
		}
		return out
	case "string":
		if s["format"] == "email" {
			return "ada@example.com"
		}
		v := "Paris"
		if n, ok := s["minLength"].(float64); ok && int(n) > len(v) {
			v += strings.Repeat("x", int(n)-len(v))
		}
		return v
	case "integer", "number":
		n := 1.0
		if m, ok := s["minimum"].(float64); ok {
			n = m
		}
		return n
	case "boolean":
		return true
	case "array":
		items, _ := s["items"].(map[string]any)
		return []any{mxGenerate(items)}
	}
	return nil
}

// mxPieces splits s into three parts (ASCII only), so streams carry text
// and tool arguments across several frames.
func mxPieces(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	a, b := len(s)/3, 2*len(s)/3
	return []string{s[:a], s[a:b], s[b:]}
}

func mxJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// serve is every fake's handler.
func (f *mxFake) serve(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, mxRecorded{Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body, Raw: raw})
	var fl *mxFailure
	if f.failure != nil && (f.failure.Times == 0 || f.failed < f.failure.Times) {
		fl = f.failure
		f.failed++
	}
	f.mu.Unlock()

	mxCanaryHeaders(w.Header())
	if fl != nil && fl.Status != 0 {
		f.writeError(w, fl.Status)
		return
	}
	turn, err := f.parse(r, raw)
	if err != nil {
		f.writeError(w, http.StatusBadRequest)
		return
	}
	rp := turn.reply()
	if !turn.stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, f.complete(rp))
		return
	}
	frames, cut := f.frames(rp, turn)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	switch {
	case fl != nil && fl.ErrorFirst:
		frames = nil
	case fl != nil && (fl.MidStream || fl.Hang):
		frames = frames[:cut]
	}
	for _, fr := range frames {
		if _, err := io.WriteString(w, fr); err != nil {
			return
		}
		flush()
	}
	switch {
	case fl != nil && (fl.MidStream || fl.ErrorFirst):
		_, _ = io.WriteString(w, f.streamError())
		flush()
	case fl != nil && fl.Hang:
		<-r.Context().Done()
		f.cancelOnce.Do(func() { close(f.canceled) })
	}
}

// parse reads the request in the fake's protocol.
func (f *mxFake) parse(r *http.Request, raw []byte) (mxTurn, error) {
	var t mxTurn
	switch f.proto {
	case mxOpenAI:
		var b struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name       string         `json:"name"`
					Parameters map[string]any `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
			ResponseFormat *struct {
				Type       string `json:"type"`
				JSONSchema *struct {
					Schema map[string]any `json:"schema"`
				} `json:"json_schema"`
			} `json:"response_format"`
			Stream        bool `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return t, err
		}
		for _, tl := range b.Tools {
			t.tools = append(t.tools, mxTool{tl.Function.Name, tl.Function.Parameters})
		}
		if n := len(b.Messages); n > 0 && b.Messages[n-1].Role == "tool" {
			var s string
			_ = json.Unmarshal(b.Messages[n-1].Content, &s)
			t.result, t.hasResult = s, true
		}
		if rf := b.ResponseFormat; rf != nil && rf.Type == "json_schema" && rf.JSONSchema != nil {
			t.schema = rf.JSONSchema.Schema
		}
		t.stream = b.Stream
		t.includeUsage = b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	case mxAnthropic:
		var b struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type    string          `json:"type"`
					Content json.RawMessage `json:"content"`
				} `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"tools"`
			OutputConfig *struct {
				Format *struct {
					Type   string         `json:"type"`
					Schema map[string]any `json:"schema"`
				} `json:"format"`
			} `json:"output_config"`
			Stream bool `json:"stream"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return t, err
		}
		for _, tl := range b.Tools {
			t.tools = append(t.tools, mxTool{tl.Name, tl.InputSchema})
		}
		if n := len(b.Messages); n > 0 && b.Messages[n-1].Role == "user" {
			for _, bl := range b.Messages[n-1].Content {
				if bl.Type == "tool_result" {
					t.result, t.hasResult = mxAnthropicText(bl.Content), true
				}
			}
		}
		if oc := b.OutputConfig; oc != nil && oc.Format != nil && oc.Format.Type == "json_schema" {
			t.schema = oc.Format.Schema
		}
		t.stream = b.Stream
	case mxGemini:
		var b struct {
			Contents []struct {
				Role  string `json:"role"`
				Parts []struct {
					FunctionResponse *struct {
						Response json.RawMessage `json:"response"`
					} `json:"functionResponse"`
				} `json:"parts"`
			} `json:"contents"`
			Tools []struct {
				FunctionDeclarations []struct {
					Name       string         `json:"name"`
					Parameters map[string]any `json:"parametersJsonSchema"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
			GenerationConfig *struct {
				ResponseMIMEType   string         `json:"responseMimeType"`
				ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
			} `json:"generationConfig"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return t, err
		}
		for _, tl := range b.Tools {
			for _, d := range tl.FunctionDeclarations {
				t.tools = append(t.tools, mxTool{d.Name, d.Parameters})
			}
		}
		if n := len(b.Contents); n > 0 && b.Contents[n-1].Role == "user" {
			for _, p := range b.Contents[n-1].Parts {
				if p.FunctionResponse != nil {
					t.result, t.hasResult = string(p.FunctionResponse.Response), true
				}
			}
		}
		if gc := b.GenerationConfig; gc != nil && gc.ResponseMIMEType == "application/json" && gc.ResponseJSONSchema != nil {
			t.schema = gc.ResponseJSONSchema
		}
		t.stream = strings.Contains(r.URL.Path, ":streamGenerateContent")
		if t.stream && r.URL.Query().Get("alt") != "sse" {
			return t, fmt.Errorf("stream without alt=sse")
		}
	}
	return t, nil
}

// mxAnthropicText is a tool_result's content: a string or text blocks.
func mxAnthropicText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// complete is a whole reply in the fake's protocol.
func (f *mxFake) complete(rp mxReply) string {
	switch f.proto {
	case mxOpenAI:
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		finish := "stop"
		if rp.call() {
			finish = "tool_calls"
			msg["tool_calls"] = []any{map[string]any{"id": "call_canary-id-1", "type": "function",
				"function": map[string]any{"name": rp.callName, "arguments": rp.callArgs}}}
		} else {
			msg["content"] = rp.text
		}
		return mxJSON(map[string]any{
			"id": "chatcmpl-canary-id-1", "object": "chat.completion", "created": 1767225600,
			"model": mxCanaryModel, "system_fingerprint": "fp_canary", "service_tier": "default",
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":   mxOpenAIUsage(),
		})
	case mxAnthropic:
		var content []any
		stop := "end_turn"
		if rp.call() {
			stop = "tool_use"
			content = append(content, map[string]any{"type": "tool_use", "id": "toolu_canary-id-1", "name": rp.callName, "input": json.RawMessage(rp.callArgs)})
		} else {
			content = append(content, map[string]any{"type": "text", "text": rp.text, "citations": nil})
		}
		return mxJSON(map[string]any{
			"id": "msg_canary-id-1", "type": "message", "role": "assistant", "model": mxCanaryModel,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": mxInputTokens, "cache_creation_input_tokens": 0,
				"cache_read_input_tokens": 0, "output_tokens": mxOutputTokens, "service_tier": "standard"},
		})
	}
	part := map[string]any{"text": rp.text}
	if rp.call() {
		part = map[string]any{"functionCall": map[string]any{"name": rp.callName, "args": json.RawMessage(rp.callArgs)}}
	}
	return mxJSON(mxGeminiChunk([]any{part}, "STOP", true))
}

func mxOpenAIUsage() map[string]any {
	return map[string]any{
		"prompt_tokens": mxInputTokens, "completion_tokens": mxOutputTokens, "total_tokens": mxInputTokens + mxOutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0},
	}
}

func mxGeminiChunk(parts []any, finish string, final bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	usage := map[string]any{"promptTokenCount": mxInputTokens, "totalTokenCount": mxInputTokens}
	if finish != "" {
		cand["finishReason"] = finish
	}
	if final {
		usage = map[string]any{"promptTokenCount": mxInputTokens, "candidatesTokenCount": mxOutputTokens,
			"totalTokenCount":     mxInputTokens + mxOutputTokens,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": mxInputTokens}}}
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": usage,
		"modelVersion": mxCanaryModel, "responseId": "canary-id-gm1"}
}

// frames is a streamed reply in the fake's protocol, as SSE frames; cut is
// the number of frames up to and including the second text delta, where a
// mid-stream failure or a hang starts. (Two: the generate-content surface
// holds the latest part back until the next one exists.)
func (f *mxFake) frames(rp mxReply, t mxTurn) (frames []string, cut int) {
	switch f.proto {
	case mxOpenAI:
		chunk := func(delta map[string]any, finish any) string {
			return "data: " + mxJSON(map[string]any{
				"id": "chatcmpl-canary-id-2", "object": "chat.completion.chunk", "created": 1767225600,
				"model": mxCanaryModel, "system_fingerprint": "fp_canary", "service_tier": "default",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
				"usage":   nil,
			}) + "\n\n"
		}
		frames = append(frames, chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
		finish := "stop"
		if rp.call() {
			finish = "tool_calls"
			frames = append(frames, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_canary-id-2",
				"type": "function", "function": map[string]any{"name": rp.callName, "arguments": ""}}}}, nil))
			for _, p := range mxPieces(rp.callArgs) {
				frames = append(frames, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
					"function": map[string]any{"arguments": p}}}}, nil))
			}
		} else {
			for i, p := range mxPieces(rp.text) {
				frames = append(frames, chunk(map[string]any{"content": p}, nil))
				if i == 1 {
					cut = len(frames)
				}
			}
		}
		frames = append(frames, chunk(map[string]any{}, finish))
		if t.includeUsage {
			frames = append(frames, "data: "+mxJSON(map[string]any{
				"id": "chatcmpl-canary-id-2", "object": "chat.completion.chunk", "created": 1767225600,
				"model": mxCanaryModel, "system_fingerprint": "fp_canary", "choices": []any{}, "usage": mxOpenAIUsage(),
			})+"\n\n")
		}
		frames = append(frames, "data: [DONE]\n\n")
	case mxAnthropic:
		ev := func(typ string, v map[string]any) string {
			v["type"] = typ
			return "event: " + typ + "\ndata: " + mxJSON(v) + "\n\n"
		}
		frames = append(frames,
			ev("message_start", map[string]any{"message": map[string]any{
				"id": "msg_canary-id-2", "type": "message", "role": "assistant", "model": mxCanaryModel,
				"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": mxInputTokens, "cache_creation_input_tokens": 0,
					"cache_read_input_tokens": 0, "output_tokens": 1, "service_tier": "standard"},
			}}),
			ev("ping", map[string]any{}))
		stop := "end_turn"
		if rp.call() {
			stop = "tool_use"
			frames = append(frames, ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{
				"type": "tool_use", "id": "toolu_canary-id-2", "name": rp.callName, "input": map[string]any{}}}))
			frames = append(frames, ev("content_block_delta", map[string]any{"index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": ""}}))
			for _, p := range mxPieces(rp.callArgs) {
				frames = append(frames, ev("content_block_delta", map[string]any{"index": 0,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": p}}))
			}
		} else {
			frames = append(frames, ev("content_block_start", map[string]any{"index": 0,
				"content_block": map[string]any{"type": "text", "text": ""}}))
			for i, p := range mxPieces(rp.text) {
				frames = append(frames, ev("content_block_delta", map[string]any{"index": 0,
					"delta": map[string]any{"type": "text_delta", "text": p}}))
				if i == 1 {
					cut = len(frames)
				}
			}
		}
		frames = append(frames,
			ev("content_block_stop", map[string]any{"index": 0}),
			ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
				"usage": map[string]any{"output_tokens": mxOutputTokens}}),
			ev("message_stop", map[string]any{}))
	case mxGemini:
		// Gemini's alt=sse frames end in CRLF pairs.
		data := func(v map[string]any) string { return "data: " + mxJSON(v) + "\r\n\r\n" }
		if rp.call() {
			// Newer models send the call and the finishReason in separate
			// chunks (upstream/gemini/testdata/function_call.sse).
			frames = append(frames,
				data(mxGeminiChunk([]any{map[string]any{"functionCall": map[string]any{"name": rp.callName, "args": json.RawMessage(rp.callArgs)},
					"thoughtSignature": "CiQB0e2Ksig2"}}, "", false)),
				data(mxGeminiChunk([]any{map[string]any{"text": ""}}, "STOP", true)))
		} else {
			ps := mxPieces(rp.text)
			for i, p := range ps {
				last := i == len(ps)-1
				finish := ""
				if last {
					finish = "STOP"
				}
				frames = append(frames, data(mxGeminiChunk([]any{map[string]any{"text": p}}, finish, last)))
				if i == 1 {
					cut = len(frames)
				}
			}
		}
	}
	if cut == 0 {
		cut = len(frames)
	}
	return frames, cut
}

// streamError is the vendor's in-stream error frame.
func (f *mxFake) streamError() string {
	switch f.proto {
	case mxOpenAI:
		return "data: " + mxJSON(map[string]any{"error": map[string]any{"message": mxCanaryModel + " is overloaded on canary-host",
			"type": "server_error", "param": nil, "code": "server_is_overloaded"}}) + "\n\n"
	case mxAnthropic:
		return "event: error\ndata: " + mxJSON(map[string]any{"type": "error", "request_id": "req_canary-id-3",
			"error": map[string]any{"type": "overloaded_error", "message": mxCanaryModel + " Overloaded"}}) + "\n\n"
	}
	// Gemini reports a mid-stream failure as a bare JSON object
	// (docs/wire/generate-content.md#errors-mid-stream, upstream/gemini/testdata/error.sse).
	return mxJSON(map[string]any{"error": map[string]any{"code": 503, "status": "UNAVAILABLE",
		"message": "The model " + mxCanaryModel + " is overloaded. Please try again later."}}) + "\r\n"
}

// writeError answers status with the vendor's error body. Rate limits (and
// 503s) carry retry guidance the vendor's way: OpenAI and Anthropic a
// retry-after header, Gemini a RetryInfo detail.
func (f *mxFake) writeError(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	retry := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	msg := fmt.Sprintf("%s failed with %d (canary-host, org-canary)", mxCanaryModel, status)
	var body string
	switch f.proto {
	case mxOpenAI:
		typ, code := "server_error", "server_error"
		switch status {
		case 400:
			typ, code = "invalid_request_error", "canary_bad_request"
		case 401:
			typ, code = "invalid_request_error", "invalid_api_key"
		case 429:
			typ, code = "requests", "rate_limit_exceeded"
		case 503:
			code = "server_is_overloaded"
		}
		if retry {
			h.Set("Retry-After", "1")
		}
		body = mxJSON(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
	case mxAnthropic:
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
			503: "overloaded_error", 529: "overloaded_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		if retry {
			h.Set("Retry-After", "1")
		}
		body = mxJSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_canary-id-4"})
	case mxGemini:
		st := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}[status]
		if st == "" {
			st = "INTERNAL"
		}
		e := map[string]any{"code": status, "message": msg, "status": st}
		if retry {
			e["details"] = []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{
					map[string]any{"quotaMetric": "generativelanguage.googleapis.com/canary_requests", "quotaId": "canary-quota"}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"},
			}
		}
		body = mxJSON(map[string]any{"error": e})
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// mxTap is an http.RoundTripper that keeps every byte a caller can read:
// the status line, every response header (name and value) and the whole
// body, streams included, as the caller reads them.
type mxTap struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen strings.Builder
}

func newMXTap() *mxTap {
	return &mxTap{base: http.DefaultTransport.(*http.Transport).Clone()}
}

func (tp *mxTap) client() *http.Client { return &http.Client{Transport: tp} }

func (tp *mxTap) add(s string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.seen.WriteString(s)
}

func (tp *mxTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := tp.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n<<< %s %s\n%s\n", r.Method, r.URL.RequestURI(), resp.Status)
	for k, vs := range resp.Header {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
	}
	tp.add(b.String())
	resp.Body = &mxTapBody{rc: resp.Body, tp: tp, trailer: resp}
	return resp, nil
}

type mxTapBody struct {
	rc      io.ReadCloser
	tp      *mxTap
	trailer *http.Response
}

func (b *mxTapBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.tp.add(string(p[:n]))
	}
	if err == io.EOF {
		for k, vs := range b.trailer.Trailer {
			b.tp.add(fmt.Sprintf("\ntrailer %s: %s\n", k, strings.Join(vs, ", ")))
		}
	}
	return n, err
}

func (b *mxTapBody) Close() error { return b.rc.Close() }

// bytes is everything seen so far.
func (tp *mxTap) bytes() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.seen.String()
}

// assertClean fails at every place the canary shows in what callers read.
func (tp *mxTap) assertClean(t *testing.T) {
	t.Helper()
	mxAssertNoCanary(t, "caller-visible bytes", tp.bytes())
}

func mxAssertNoCanary(t *testing.T, what, s string) {
	t.Helper()
	low := strings.ToLower(s)
	for off, n := 0, 0; n < 5; n++ {
		i := strings.Index(low[off:], mxCanary)
		if i < 0 {
			return
		}
		i += off
		from, to := max(0, i-300), min(len(s), i+100)
		t.Errorf("%s leak the backend (canary at byte %d): …%s…", what, i, s[from:to])
		off = i + len(mxCanary)
	}
}
