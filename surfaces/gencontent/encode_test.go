package gencontent

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

var (
	thoughtsReq = &llm.Request{Model: "gemini-2.5-pro", Reasoning: &llm.Reasoning{Enabled: true, IncludeThoughts: true}}
	plainReq    = &llm.Request{Model: "gemini-2.5-flash"}
)

func toolCallPart(id, name, args, sig string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args), Signature: sig}}
}

func reasoningPart(text, sig string) llm.Part {
	return llm.Part{Type: llm.PartReasoning, Text: text, Signature: sig}
}

// responseCases are the complete replies with golden files in
// testdata/response/.
var responseCases = []struct {
	name string
	req  *llm.Request
	resp *llm.Response
}{
	{"text", plainReq, &llm.Response{
		Content:      []llm.Part{llm.TextPart("Hello! How can I help?")},
		FinishReason: llm.FinishStop,
		Usage:        llm.Usage{InputTokens: 12, OutputTokens: 7},
	}},
	{"thoughts_shown", thoughtsReq, &llm.Response{
		Content:      []llm.Part{reasoningPart("17 × 23 = 17 × 20 + 17 × 3.", "sig-thinking"), llm.TextPart("391")},
		FinishReason: llm.FinishStop,
		Usage:        llm.Usage{InputTokens: 120, CachedInputTokens: 96, OutputTokens: 45, ReasoningTokens: 31},
	}},
	{"hidden_reasoning_tool_call", plainReq, &llm.Response{
		Content: []llm.Part{
			reasoningPart("The user wants the weather; call the tool.", "sig-thinking"),
			llm.TextPart("Checking the weather."),
			toolCallPart("call_1", "get_weather", `{"city": "Paris"}`, "sig-call"),
			toolCallPart("call_2", "get_time", ``, ""),
		},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{InputTokens: 80, OutputTokens: 40, ReasoningTokens: 25},
	}},
	{"unsigned_thoughts_hidden", plainReq, &llm.Response{
		Content:      []llm.Part{reasoningPart("thinking nobody asked to see", ""), llm.TextPart("Hi.")},
		FinishReason: llm.FinishStopSequence,
		Usage:        llm.Usage{InputTokens: 5, OutputTokens: 9, ReasoningTokens: 7},
	}},
	{"max_tokens_in_reasoning", plainReq, &llm.Response{
		Content:      []llm.Part{reasoningPart("a long chain of thought", "sig-cut")},
		FinishReason: llm.FinishLength,
		Usage:        llm.Usage{InputTokens: 10, OutputTokens: 64, ReasoningTokens: 64},
	}},
	{"content_filter", plainReq, &llm.Response{
		FinishReason: llm.FinishContentFilter,
		Usage:        llm.Usage{InputTokens: 10},
	}},
	{"broken_arguments", plainReq, &llm.Response{
		Content:      []llm.Part{toolCallPart("call_1", "search", `{"q": "unterminated`, "")},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{InputTokens: 10, OutputTokens: 5},
	}},
}

func TestCodec_WriteResponse(t *testing.T) {
	for _, tc := range responseCases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			resp := *tc.resp
			resp.ID, resp.Model = "gwRESPONSEID", tc.req.Model
			rec := httptest.NewRecorder()
			is.NoErr(Codec{}.WriteResponse(rec, tc.req, &resp))
			is.Equal(rec.Code, 200) // exactly 200: python-genai fails on other 2xx
			is.True(strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json"))
			goldenJSON(t, filepath.Join("response", tc.name+".json"), rec.Body.Bytes())
		})
	}
}

// replayable is what of a reply comes back on the next call: everything but
// reasoning that has no signature and was not shown.
func replayable(parts []llm.Part, show bool) []llm.Part {
	var out []llm.Part
	for _, p := range parts {
		if p.Type == llm.PartReasoning && p.Signature == "" && !p.Redacted && !(show && p.Text != "") {
			continue
		}
		if p.Type == llm.PartToolCall {
			tc := *p.ToolCall
			tc.Arguments = callArgs(tc.Arguments)
			p.ToolCall = &tc
		}
		out = append(out, p)
	}
	return out
}

// historyRequest wraps model contents as a caller's next request: a user
// turn, the model's contents, and a user turn answering.
func historyRequest(t *testing.T, model []content) []byte {
	t.Helper()
	contents := append([]content{{Role: "user", Parts: []part{{Text: "question"}}}}, model...)
	contents = append(contents, content{Role: "user", Parts: []part{{Text: "next"}}})
	b, err := marshal(generateContentRequest{Contents: contents})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assistantParts decodes body and returns the parts of its one model turn.
func assistantParts(t *testing.T, body []byte) []llm.Part {
	t.Helper()
	req, err := decodeRequest(body, "")
	if err != nil {
		t.Fatalf("decode history: %v\n%s", err, body)
	}
	var parts []llm.Part
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			parts = append(parts, m.Parts...)
		}
	}
	return parts
}

// partsCmp compares parts with nil and empty slices equal, and raw JSON by
// its bytes.
var partsCmp = []cmp.Option{
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(llm.Message{}, "Turns"), // how the caller wrote it: encoding merges turns
	cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 },
		cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })),
}

// TestCodec_WriteResponse_replay sends each reply back as history, as the
// SDKs' chat helpers do, and checks that every signature, tool call and
// shown thought comes back where it was.
func TestCodec_WriteResponse_replay(t *testing.T) {
	for _, tc := range responseCases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := (Codec{}).WriteResponse(rec, tc.req, tc.resp); err != nil {
				t.Fatal(err)
			}
			var out generateContentResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			got := assistantParts(t, historyRequest(t, []content{out.Candidates[0].Content}))
			want := replayable(tc.resp.Content, showThoughts(tc.req))
			if d := cmp.Diff(want, got, partsCmp...); d != "" {
				t.Errorf("replayed parts (-want +got):\n%s", d)
			}
		})
	}
}

// streamCases are event sequences with golden streams in testdata/stream/.
var streamCases = []struct {
	name   string
	req    *llm.Request
	events []llm.Event
	err    *llm.Error // written with Stream.Error after the events
}{
	{"thoughts_text_and_call", thoughtsReq, []llm.Event{
		{Type: llm.EventReasoningDelta, Text: "Thinking about "},
		{Type: llm.EventReasoningDelta, Text: "Paris weather."},
		{Type: llm.EventReasoningDelta, Signature: "sig-thinking"},
		{Type: llm.EventTextDelta, Text: "It is "},
		{Type: llm.EventTextDelta, Text: ""},
		{Type: llm.EventTextDelta, Text: "18°C <sunny> & dry."},
		{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather", Signature: "sig-call"}},
		{Type: llm.EventToolCallDelta, Index: 0, Text: `{"city":`},
		{Type: llm.EventToolCallDelta, Index: 0, Text: ` "Paris"}`},
		{Type: llm.EventFinish, FinishReason: llm.FinishToolCalls,
			Usage: &llm.Usage{InputTokens: 120, CachedInputTokens: 96, OutputTokens: 45, ReasoningTokens: 31}},
	}, nil},
	{"hidden_reasoning", plainReq, []llm.Event{
		{Type: llm.EventReasoningDelta, Text: "secret "},
		{Type: llm.EventReasoningDelta, Text: "plan", Signature: "sig-thinking"},
		{Type: llm.EventReasoningDelta, Text: "unsigned, dropped"},
		{Type: llm.EventTextDelta, Text: "Hello"},
		{Type: llm.EventTextDelta, Text: ", world."},
		{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &llm.Usage{InputTokens: 10, OutputTokens: 20, ReasoningTokens: 12}},
	}, nil},
	{"parallel_calls_interleaved", plainReq, []llm.Event{
		{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "call_a", Name: "lookup"}},
		{Type: llm.EventToolCallStart, Index: 1, ToolCall: &llm.ToolCall{ID: "call_b", Name: "lookup"}},
		{Type: llm.EventToolCallDelta, Index: 1, Text: `{"q":"b"`},
		{Type: llm.EventToolCallDelta, Index: 0, Text: `{"q":"a"}`},
		{Type: llm.EventToolCallDelta, Index: 1, Text: `}`},
		{Type: llm.EventFinish, FinishReason: llm.FinishToolCalls, Usage: &llm.Usage{InputTokens: 30, OutputTokens: 16}},
	}, nil},
	{"midstream_error", plainReq, []llm.Event{
		{Type: llm.EventTextDelta, Text: "Once upon"},
		{Type: llm.EventTextDelta, Text: " a time"},
		{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "call_1", Name: "f"}},
	}, &llm.Error{Kind: llm.KindOverloaded, Message: "The model is overloaded. Please try again later."}},
	{"empty_output", plainReq, []llm.Event{
		{Type: llm.EventFinish, FinishReason: llm.FinishContentFilter, Usage: &llm.Usage{InputTokens: 9}},
	}, nil},
	{"reasoning_only", plainReq, []llm.Event{
		{Type: llm.EventReasoningDelta, Text: "long thought", Signature: "sig-cut"},
		{Type: llm.EventFinish, FinishReason: llm.FinishLength, Usage: &llm.Usage{InputTokens: 9, OutputTokens: 64, ReasoningTokens: 64}},
	}, nil},
	{"usage_missing", plainReq, []llm.Event{
		{Type: llm.EventTextDelta, Text: "ok"},
		{Type: llm.EventFinish, FinishReason: llm.FinishStop},
	}, nil},
}

func runStream(t *testing.T, req *llm.Request, events []llm.Event, e *llm.Error) []byte {
	t.Helper()
	var buf bytes.Buffer
	s := Codec{}.NewStream(req, "gwSTREAMID", time.Unix(1700000000, 0))
	if err := s.Start(&buf); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := s.Event(&buf, ev); err != nil {
			t.Fatal(err)
		}
	}
	if e != nil {
		if err := s.Error(&buf, e); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestStream(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			got := runStream(t, tc.req, tc.events, tc.err)
			goldenSSE(t, filepath.Join("stream", tc.name+".sse"), got)
			checkStreamRules(t, got, tc.err != nil)
		})
	}
}

// checkStreamRules checks what every stream must do whatever its events:
// every data chunk carries responseId, modelVersion, role "model" and index
// 0; only the last carries finishReason and usageMetadata, and it has data
// parts whenever the stream produced any; an error ends the stream.
func checkStreamRules(t *testing.T, b []byte, failed bool) {
	t.Helper()
	frames := parseStream(t, b)
	if len(frames) == 0 {
		t.Fatal("empty stream")
	}
	var chunks []generateContentResponse
	for i, f := range frames {
		if f.Error {
			if !failed || i != len(frames)-1 {
				t.Fatalf("error frame %d of %d", i, len(frames))
			}
			continue
		}
		raw, _ := json.Marshal(f.JSON)
		var c generateContentResponse
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	anyData := false
	for i, c := range chunks {
		last := i == len(chunks)-1 && !failed
		if c.ResponseID != "gwSTREAMID" || c.ModelVersion == "" || len(c.Candidates) != 1 {
			t.Errorf("chunk %d: responseId %q, modelVersion %q, %d candidates", i, c.ResponseID, c.ModelVersion, len(c.Candidates))
			continue
		}
		cand := c.Candidates[0]
		if cand.Content.Role != "model" || cand.Index != 0 {
			t.Errorf("chunk %d: role %q index %d", i, cand.Content.Role, cand.Index)
		}
		if (cand.FinishReason != "") != last || (c.UsageMetadata != nil) != last {
			t.Errorf("chunk %d: finishReason %q, usage %v (last: %v)", i, cand.FinishReason, c.UsageMetadata, last)
		}
		data := false
		for _, p := range cand.Content.Parts {
			if p.Text != "" || p.FunctionCall != nil || p.InlineData != nil {
				data = true
			}
		}
		if !last && !data {
			t.Errorf("chunk %d has no data part", i)
		}
		if last && anyData && !data {
			t.Errorf("the last chunk has no data part, though the stream had some")
		}
		anyData = anyData || data
	}
}

// TestStream_replay collects a stream as the chat helpers do (each chunk's
// content a model content of its own) and sends it back as history.
func TestStream_replay(t *testing.T) {
	for _, tc := range streamCases {
		if tc.err != nil {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			frames := parseStream(t, runStream(t, tc.req, tc.events, nil))
			var model []content
			for _, f := range frames {
				raw, _ := json.Marshal(f.JSON)
				var c generateContentResponse
				if err := json.Unmarshal(raw, &c); err != nil {
					t.Fatal(err)
				}
				model = append(model, c.Candidates[0].Content)
			}
			got := assistantParts(t, historyRequest(t, model))
			want := replayable(collect(tc.events), showThoughts(tc.req))
			if d := cmp.Diff(want, got, partsCmp...); d != "" {
				t.Errorf("replayed parts (-want +got):\n%s", d)
			}
		})
	}
}

// collect assembles stream events into the parts of the complete reply.
func collect(events []llm.Event) []llm.Part {
	var parts []llm.Part
	calls := map[int]*llm.ToolCall{}
	var order []int
	for _, ev := range events {
		switch ev.Type {
		case llm.EventReasoningDelta:
			n := len(parts)
			if n == 0 || parts[n-1].Type != llm.PartReasoning || parts[n-1].Signature != "" {
				parts = append(parts, llm.Part{Type: llm.PartReasoning})
				n++
			}
			parts[n-1].Text += ev.Text
			parts[n-1].Signature = ev.Signature
		case llm.EventTextDelta:
			if ev.Text == "" {
				continue
			}
			if n := len(parts); n > 0 && parts[n-1].Type == llm.PartText {
				parts[n-1].Text += ev.Text
				continue
			}
			parts = append(parts, llm.TextPart(ev.Text))
		case llm.EventToolCallStart:
			tc := *ev.ToolCall
			calls[ev.Index] = &tc
			order = append(order, ev.Index)
		case llm.EventToolCallDelta:
			calls[ev.Index].Arguments = append(calls[ev.Index].Arguments, ev.Text...)
		}
	}
	for _, i := range order {
		parts = append(parts, llm.Part{Type: llm.PartToolCall, ToolCall: calls[i]})
	}
	// Consecutive text parts arrive as one text part per chunk; the
	// decoder keeps them apart.
	return splitText(parts, events)
}

// splitText undoes the merging of text deltas: each non-empty text delta is
// its own part on the wire, and comes back as one.
func splitText(parts []llm.Part, events []llm.Event) []llm.Part {
	var texts []string
	for _, ev := range events {
		if ev.Type == llm.EventTextDelta && ev.Text != "" {
			texts = append(texts, ev.Text)
		}
	}
	var out []llm.Part
	for _, p := range parts {
		if p.Type != llm.PartText {
			out = append(out, p)
			continue
		}
		for _, s := range texts {
			out = append(out, llm.TextPart(s))
		}
		texts = nil
	}
	return out
}

// TestCodec_WriteError has one golden envelope per error kind.
func TestCodec_WriteError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     int
		retryAfter string
	}{
		{"invalid_request", llm.InvalidParam("generationConfig.temperature", "generationConfig.temperature must be between 0 and 2"), 400, ""},
		{"auth", &llm.Error{Kind: llm.KindAuth, Message: "invalid API key"}, 401, ""},
		{"payment_required", &llm.Error{Kind: llm.KindPaymentRequired, Message: "insufficient credits"}, 402, ""},
		{"not_found", &llm.Error{Kind: llm.KindNotFound, Message: "no such generation"}, 404, ""},
		{"conflict", &llm.Error{Kind: llm.KindConflict, Message: "the response is older than 30 days"}, 409, ""},
		{"too_large", &llm.Error{Kind: llm.KindTooLarge, Message: "Request payload size exceeds the limit"}, 413, ""},
		{"rate_limited", &llm.Error{Kind: llm.KindRateLimited, Message: "rate limit exceeded", RetryAfter: 30 * time.Second}, 429, "30"},
		{"upstream", &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}, 502, ""},
		{"overloaded", &llm.Error{Kind: llm.KindOverloaded, Message: "The model is overloaded. Please try again later.", RetryAfter: 1500 * time.Millisecond}, 503, "2"},
		{"unavailable", &llm.Error{Kind: llm.KindUnavailable, Message: "the gateway cannot record usage at the moment, so it is not taking billable calls; retry later", RetryAfter: 5 * time.Second}, 503, "5"},
		{"timeout", &llm.Error{Kind: llm.KindTimeout, Message: "the upstream model timed out"}, 504, ""},
		{"internal", &llm.Error{Kind: llm.KindInternal}, 500, ""},
		{"not_an_llm_error", errors.New("dial tcp 10.0.0.7:443: secret-backend.internal refused"), 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			rec := httptest.NewRecorder()
			rec.Header().Set("X-Request-Id", "req_0123456789abcdef")
			Codec{}.WriteError(rec, tt.err)
			is.Equal(rec.Code, tt.status)
			is.Equal(rec.Header().Get("Retry-After"), tt.retryAfter)
			is.True(strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json"))
			is.True(!strings.Contains(rec.Body.String(), "secret-backend")) // never err.Error()
			goldenJSON(t, filepath.Join("errors", tt.name+".json"), rec.Body.Bytes())
		})
	}
}

func TestCodec_NewID(t *testing.T) {
	is := is.New(t)
	seen := map[string]bool{}
	for range 100 {
		id := Codec{}.NewID()
		is.True(strings.HasPrefix(id, "gw"))
		is.Equal(len(id), 24)
		is.True(!strings.ContainsAny(id, "+/=?&#% ")) // safe in ?id=
		is.True(!seen[id])
		seen[id] = true
	}
	is.Equal(Codec{}.Surface(), llm.SurfaceGenContent)
}
