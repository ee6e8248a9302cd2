package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/internal/golden"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// The codecs satisfy the server's contract (surface.Codec) and its optional
// parts.
var (
	_ surface.Codec   = Codec{}
	_ surface.Lister  = Codec{}
	_ surface.Stream  = (*Stream)(nil)
	_ surface.Codec   = ResponsesCodec{}
	_ surface.Counter = ResponsesCodec{}
	_ surface.Stream  = (*ResponsesStream)(nil)
)

// goldenCreated is the fixed creation time of every golden reply.
var goldenCreated = time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z

// goldenJSON compares got with testdata/<name> as JSON values, or
// rewrites it under -update.
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.JSON(t, name, got)
}

// goldenSSE compares a stream with testdata/<name> event by event: the
// event names in order, and each data payload as a JSON value.
func goldenSSE(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.File(t, name, got, func(want, got []byte) {
		t.Helper()
		wantEvents, gotEvents := parseSSE(t, want), parseSSE(t, got)
		for i := range max(len(wantEvents), len(gotEvents)) {
			var w, g sseFrame
			if i < len(wantEvents) {
				w = wantEvents[i]
			}
			if i < len(gotEvents) {
				g = gotEvents[i]
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("testdata/%s: event %d mismatch (-golden +got):\n%s", name, i, d)
			}
		}
	})
}

// canonicalJSON decodes b and marshals it again: key order and spacing
// stop mattering, values do.
func canonicalJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// sseFrame is one parsed SSE frame: the event name ("" when the frame has
// no event line, as on chat-completions) and the data, re-marshalled JSON
// or the literal [DONE].
type sseFrame struct {
	Event string
	Data  string
}

// parseSSE splits a stream into frames. Every frame has at most one event
// line and exactly one data line; the data is JSON or [DONE]. On named
// frames the JSON "type" must equal the event name (the SDKs dispatch on
// the JSON type, other clients on the name).
func parseSSE(t *testing.T, b []byte) []sseFrame {
	t.Helper()
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n\n")) {
		t.Errorf("stream does not end with a blank line: %q", b)
	}
	var frames []sseFrame
	var cur sseFrame
	var haveData bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !haveData {
				t.Fatalf("frame without data: %+v", cur)
			}
			frames = append(frames, cur)
			cur, haveData = sseFrame{}, false
		case strings.HasPrefix(line, "event: "):
			if cur.Event != "" || haveData {
				t.Fatalf("misplaced event line %q", line)
			}
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if haveData {
				t.Fatalf("frame %q has two data lines", cur.Event)
			}
			data := strings.TrimPrefix(line, "data: ")
			haveData = true
			if data == "[DONE]" {
				cur.Data = data
				continue
			}
			cur.Data = canonicalJSON(t, []byte(data))
			if cur.Event != "" {
				var typed struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal([]byte(data), &typed)
				if typed.Type != cur.Event {
					t.Errorf("frame %q carries JSON type %q", cur.Event, typed.Type)
				}
			}
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.Event != "" || haveData {
		t.Errorf("unterminated frame %+v", cur)
	}
	return frames
}

// frameJSON decodes a frame's data into v.
func frameJSON(t *testing.T, f sseFrame, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(f.Data), v); err != nil {
		t.Fatalf("frame %q: %v", f.Data, err)
	}
}

// runStream encodes events with enc as the server's streaming loop does.
func runStream(t *testing.T, enc surface.Stream, events []llm.Event, fail *llm.Error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := enc.Start(&buf); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := enc.Event(&buf, ev); err != nil {
			t.Fatal(err)
		}
	}
	if fail != nil {
		if err := enc.Error(&buf, fail); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// The fixed event lists the stream goldens are produced from.
var (
	// completeEvents is a whole reply: reasoning (ending with a signature
	// only event), then content, then a tool call whose arguments arrive in
	// two fragments, then the finish with usage.
	completeEvents = []llm.Event{
		{Type: llm.EventReasoningDelta, Text: "The user wants "},
		{Type: llm.EventReasoningDelta, Text: "the weather."},
		{Type: llm.EventReasoningDelta, Signature: "sig-opaque"},
		{Type: llm.EventTextDelta, Text: "Let me "},
		{Type: llm.EventTextDelta, Text: "check."},
		{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "call_7Qx", Name: "get_weather"}},
		{Type: llm.EventToolCallDelta, Index: 0, Text: `{"city":`},
		{Type: llm.EventToolCallDelta, Index: 0, Text: `"Paris"}`},
		{Type: llm.EventFinish, FinishReason: llm.FinishToolCalls, Usage: &llm.Usage{
			InputTokens: 81, OutputTokens: 18, CachedInputTokens: 64, CacheCreationTokens: 4, ReasoningTokens: 5}},
	}
	textEvents = []llm.Event{
		{Type: llm.EventTextDelta, Text: "Hello"},
		{Type: llm.EventTextDelta, Text: "!"},
		{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &llm.Usage{InputTokens: 12, OutputTokens: 3}},
	}
	emptyEvents = []llm.Event{
		{Type: llm.EventFinish, FinishReason: llm.FinishLength, Usage: &llm.Usage{InputTokens: 12}},
	}
	partialEvents = []llm.Event{
		{Type: llm.EventTextDelta, Text: "Partial "},
		{Type: llm.EventTextDelta, Text: "answer"},
	}
	overloaded = &llm.Error{Kind: llm.KindOverloaded, Message: "the upstream model is overloaded; retry shortly"}
)

// goldenResponse is a complete reply with reasoning, text and a tool call.
func goldenResponse(id string) *llm.Response {
	return &llm.Response{
		ID: id, Model: "svc-fusion", Created: goldenCreated,
		Content: []llm.Part{
			{Type: llm.PartReasoning, Text: "The user wants the weather.", Signature: "sig-opaque"},
			llm.TextPart("Let me check."),
			toolCall("call_7Qx", "get_weather", `{"city":"Paris"}`),
		},
		FinishReason: llm.FinishToolCalls,
		Usage:        llm.Usage{InputTokens: 81, OutputTokens: 18, CachedInputTokens: 64, CacheCreationTokens: 4, ReasoningTokens: 5},
	}
}

func TestStream_Golden(t *testing.T) {
	tests := []struct {
		name         string
		file         string
		includeUsage bool
		events       []llm.Event
		fail         *llm.Error
	}{
		{"reasoning, content, tool call split across frames, usage", "chat_stream.sse", true, completeEvents, nil},
		{"text without include_usage", "chat_stream_text.sse", false, textEvents, nil},
		{"empty output with a usage-only trailer", "chat_stream_empty.sse", true, emptyEvents, nil},
		{"error mid-stream", "chat_stream_error.sse", true, partialEvents, overloaded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &llm.Request{Model: "svc-fusion", Stream: true, IncludeUsage: tc.includeUsage}
			got := runStream(t, Codec{}.NewStream(req, "chatcmpl-golden", goldenCreated), tc.events, tc.fail)
			goldenSSE(t, tc.file, got)
			checkChatStream(t, parseSSE(t, got), tc.includeUsage, tc.fail != nil)
		})
	}
}

// checkChatStream checks the rules docs/wire/chat-completions.md#streaming sets
// for every chat stream, whatever its content.
func checkChatStream(t *testing.T, frames []sseFrame, includeUsage, failed bool) {
	t.Helper()
	type chunkView struct {
		ID      string           `json:"id"`
		Object  string           `json:"object"`
		Created int64            `json:"created"`
		Model   string           `json:"model"`
		Choices []map[string]any `json:"choices"`
		Usage   json.RawMessage  `json:"usage"`
		Error   json.RawMessage  `json:"error"`
	}
	if len(frames) == 0 {
		t.Fatal("empty stream")
	}
	last := frames[len(frames)-1]
	if failed {
		var v chunkView
		frameJSON(t, last, &v)
		if v.Error == nil {
			t.Errorf("failed stream does not end with an error frame: %s", last.Data)
		}
		frames = frames[:len(frames)-1]
	} else {
		if last.Data != "[DONE]" {
			t.Errorf("stream does not end with [DONE]: %s", last.Data)
		}
		frames = frames[:len(frames)-1]
	}
	sawContent, sawFinish := false, false
	toolStarted := map[float64]bool{}
	for i, f := range frames {
		if f.Event != "" {
			t.Errorf("frame %d has an event line %q", i, f.Event)
		}
		if f.Data == "[DONE]" {
			t.Fatalf("[DONE] before the end")
		}
		var raw map[string]json.RawMessage
		frameJSON(t, f, &raw)
		if _, ok := raw["error"]; ok {
			t.Errorf("frame %d has an error key (openai-go aborts on it): %s", i, f.Data)
		}
		var c chunkView
		frameJSON(t, f, &c)
		if c.ID != "chatcmpl-golden" || c.Object != "chat.completion.chunk" || c.Created != goldenCreated.Unix() || c.Model != "svc-fusion" {
			t.Errorf("frame %d header: %s", i, f.Data)
		}
		_, hasUsage := raw["usage"]
		usageChunk := includeUsage && !failed && i == len(frames)-1
		switch {
		case !includeUsage && hasUsage:
			t.Errorf("frame %d has usage though include_usage is off", i)
		case includeUsage && !usageChunk && string(c.Usage) != "null":
			t.Errorf("frame %d: usage is %s, want null", i, c.Usage)
		case usageChunk:
			if len(c.Choices) != 0 || string(c.Usage) == "null" || !hasUsage {
				t.Errorf("usage chunk must have choices [] and usage: %s", f.Data)
			}
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("frame %d has %d choices", i, len(c.Choices))
		}
		ch := c.Choices[0]
		delta, _ := ch["delta"].(map[string]any)
		if i == 0 && delta["role"] != "assistant" {
			t.Errorf("first delta lacks role assistant: %s", f.Data)
		}
		if _, ok := delta["reasoning_content"]; ok {
			t.Errorf("frame %d has reasoning_content", i)
		}
		if _, ok := delta["reasoning"]; ok && sawContent {
			t.Errorf("frame %d: reasoning after content", i)
		}
		if _, ok := delta["content"]; ok {
			sawContent = true
		}
		if tcs, ok := delta["tool_calls"]; ok {
			calls, _ := tcs.([]any)
			if len(calls) == 0 {
				t.Errorf("frame %d: empty tool_calls", i)
			}
			for _, x := range calls {
				tc, _ := x.(map[string]any)
				idx, ok := tc["index"].(float64)
				if !ok {
					t.Errorf("frame %d: tool call delta without index", i)
				}
				fn, _ := tc["function"].(map[string]any)
				if !toolStarted[idx] {
					toolStarted[idx] = true
					if tc["id"] == "" || tc["type"] != "function" || fn["name"] == nil || fn["arguments"] != "" {
						t.Errorf("frame %d: first tool call delta needs id, type, name and arguments \"\": %s", i, f.Data)
					}
				} else if tc["id"] != nil || tc["type"] != nil || fn["name"] != nil {
					t.Errorf("frame %d: later tool call delta repeats identity: %s", i, f.Data)
				}
			}
		}
		if ch["finish_reason"] != nil {
			sawFinish = true
		}
	}
	if !failed && !sawFinish {
		t.Error("no chunk carries a finish_reason")
	}
}

func TestWriteResponse_Golden(t *testing.T) {
	tests := []struct {
		name string
		file string
		resp *llm.Response
	}{
		{"reasoning, text and a tool call", "chat_response.json", goldenResponse("chatcmpl-golden")},
		{"text only", "chat_response_text.json", &llm.Response{
			ID: "chatcmpl-golden", Model: "gpt-4.1-mini", Created: goldenCreated,
			Content: []llm.Part{llm.TextPart("Hello!")}, FinishReason: llm.FinishStop,
			Usage: llm.Usage{InputTokens: 12, OutputTokens: 3}}},
		{"empty output cut by max tokens", "chat_response_empty.json", &llm.Response{
			ID: "chatcmpl-golden", Model: "svc-saver", Created: goldenCreated,
			FinishReason: llm.FinishLength, Usage: llm.Usage{InputTokens: 12}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := (Codec{}).WriteResponse(rec, &llm.Request{Model: tc.resp.Model}, tc.resp); err != nil {
				t.Fatal(err)
			}
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			goldenJSON(t, tc.file, rec.Body.Bytes())

			var raw struct {
				Choices []struct {
					Message map[string]json.RawMessage `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
				t.Fatal(err)
			}
			msg := raw.Choices[0].Message
			if _, ok := msg["reasoning_content"]; ok {
				t.Error("message has reasoning_content")
			}
			r, ok := msg["reasoning"]
			if !ok || !(string(r) == "null" || r[0] == '"') {
				t.Errorf("message.reasoning is %s, want a string or null", r)
			}
		})
	}
}

func TestResponsesWriteResponse_Golden(t *testing.T) {
	req := &llm.Request{
		Model:  "svc-fusion",
		System: []llm.Part{llm.TextPart("be brief")},
		Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		Reasoning: &llm.Reasoning{Effort: "low", Enabled: true, IncludeThoughts: true},
		MaxTokens: 1024,
	}
	tests := []struct {
		name string
		file string
		resp *llm.Response
	}{
		{"reasoning, text and a function call", "responses_response.json", goldenResponse("resp_golden")},
		{"incomplete at max_output_tokens", "responses_response_incomplete.json", &llm.Response{
			ID: "resp_golden", Model: "svc-fusion", Created: goldenCreated,
			Content: []llm.Part{llm.TextPart("Partial")}, FinishReason: llm.FinishLength,
			Usage: llm.Usage{InputTokens: 12, OutputTokens: 1024}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := (ResponsesCodec{}).WriteResponse(rec, req, tc.resp); err != nil {
				t.Fatal(err)
			}
			goldenJSON(t, tc.file, rec.Body.Bytes())
		})
	}
}

func TestResponsesStream_Golden(t *testing.T) {
	req := &llm.Request{
		Model: "svc-fusion", Stream: true, IncludeUsage: true,
		Tools:     []llm.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		Reasoning: &llm.Reasoning{Effort: "low", Enabled: true, IncludeThoughts: true},
	}
	tests := []struct {
		name   string
		file   string
		events []llm.Event
		fail   *llm.Error
	}{
		{"reasoning, text and a function call", "responses_stream.sse", completeEvents, nil},
		{"text", "responses_stream_text.sse", textEvents, nil},
		{"empty output, incomplete", "responses_stream_empty.sse", emptyEvents, nil},
		{"error mid-stream", "responses_stream_error.sse", partialEvents, overloaded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := ResponsesCodec{}.newStream(req, "resp_golden", goldenCreated)
			enc.now = func() time.Time { return goldenCreated.Add(2 * time.Second) }
			got := runStream(t, enc, tc.events, tc.fail)
			goldenSSE(t, tc.file, got)
			checkResponsesStream(t, parseSSE(t, got), tc.fail != nil)
		})
	}
}

// checkResponsesStream checks the stream-helper rules of
// docs/wire/chat-completions.md#responses-streaming: response.created first, one
// sequence_number counter from 0, append-only output indexes, item ids on
// deltas matching the open item, and exactly one terminal event, last.
func checkResponsesStream(t *testing.T, frames []sseFrame, failed bool) {
	t.Helper()
	type ev struct {
		Type           string `json:"type"`
		SequenceNumber *int   `json:"sequence_number"`
		OutputIndex    *int   `json:"output_index"`
		ItemID         string `json:"item_id"`
		Item           *struct {
			ID     string `json:"id"`
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"item"`
	}
	terminals := map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true}
	var items []string // item ids by output_index
	open := -1
	for i, f := range frames {
		if f.Data == "[DONE]" {
			t.Fatalf("Responses stream sent [DONE]")
		}
		var e ev
		frameJSON(t, f, &e)
		if e.SequenceNumber == nil || *e.SequenceNumber != i {
			t.Errorf("event %d (%s): sequence_number %v", i, e.Type, e.SequenceNumber)
		}
		if i == 0 && e.Type != "response.created" {
			t.Errorf("first event is %s", e.Type)
		}
		if terminals[e.Type] != (i == len(frames)-1) {
			t.Errorf("event %d (%s): terminal events must come exactly once, last", i, e.Type)
		}
		switch e.Type {
		case "response.output_item.added":
			if e.OutputIndex == nil || *e.OutputIndex != len(items) {
				t.Errorf("output_item.added at %v, want %d", e.OutputIndex, len(items))
			}
			if e.Item == nil || e.Item.ID == "" || e.Item.Type == "function_call" && e.Item.CallID == "" {
				t.Errorf("output item without id: %s", f.Data)
			} else {
				for _, id := range items {
					if id == e.Item.ID {
						t.Errorf("duplicate item id %s", id)
					}
				}
				items = append(items, e.Item.ID)
			}
			open = len(items) - 1
		case "response.output_item.done":
			if e.OutputIndex == nil || *e.OutputIndex != open || e.Item == nil || e.Item.ID != items[open] {
				t.Errorf("output_item.done does not close the open item: %s", f.Data)
			}
			open = -1
		default:
			if e.ItemID != "" && (open < 0 || e.ItemID != items[open] || e.OutputIndex == nil || *e.OutputIndex != open) {
				t.Errorf("event %d (%s) names item %s at %v; open is %d", i, e.Type, e.ItemID, e.OutputIndex, open)
			}
		}
	}
	if failed {
		if len(frames) < 2 || !strings.Contains(frames[len(frames)-2].Data, `"error"`) || frames[len(frames)-1].Event != "response.failed" {
			t.Errorf("failed stream must end with error then response.failed")
		}
	}
}

func TestWriteError_Golden(t *testing.T) {
	kinds := []struct {
		kind  llm.Kind
		err   error
		retry bool
	}{
		{llm.KindInvalidRequest, llm.InvalidParam("messages", "messages must be a non-empty array"), false},
		{llm.KindAuth, &llm.Error{Kind: llm.KindAuth, Message: "invalid API key"}, false},
		{llm.KindPaymentRequired, &llm.Error{Kind: llm.KindPaymentRequired, Message: "insufficient credits: the account balance is 0.000000 USD; add credits to continue"}, false},
		{llm.KindNotFound, &llm.Error{Kind: llm.KindNotFound, Message: "no route for GET /svc/v1/nope"}, false},
		{llm.KindConflict, &llm.Error{Kind: llm.KindConflict, Message: "feedback is accepted for 30 days after a response"}, false},
		{llm.KindTooLarge, &llm.Error{Kind: llm.KindTooLarge, Message: "request body is larger than the limit of 33554432 bytes"}, false},
		{llm.KindRateLimited, &llm.Error{Kind: llm.KindRateLimited, Message: "rate limit reached; retry shortly", RetryAfter: 1500 * time.Millisecond}, true},
		{llm.KindUpstream, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}, true},
		{llm.KindOverloaded, &llm.Error{Kind: llm.KindOverloaded, Message: "the upstream model is overloaded; retry shortly", RetryAfter: 2 * time.Second}, true},
		{llm.KindUnavailable, &llm.Error{Kind: llm.KindUnavailable, Message: "the gateway cannot record usage at the moment, so it is not taking billable calls; retry later", RetryAfter: 5 * time.Second}, true},
		{llm.KindTimeout, &llm.Error{Kind: llm.KindTimeout, Message: "the upstream model did not answer in time"}, true},
		{llm.KindInternal, errString("database is locked: /var/lib/svcgw.db"), true},
	}
	for _, tc := range kinds {
		t.Run(string(tc.kind), func(t *testing.T) {
			rec := httptest.NewRecorder()
			Codec{}.WriteError(rec, tc.err)
			if want := tc.kind.Status(); rec.Code != want {
				t.Errorf("status %d, want %d", rec.Code, want)
			}
			if strings.Contains(rec.Body.String(), "svcgw.db") {
				t.Errorf("internal error leaks its cause: %s", rec.Body)
			}
			env := writeErrorEnvelope(t, tc.err)
			if len(env.Keys) != 4 {
				t.Errorf("envelope keys %v, want all of message, type, param, code", env.Keys)
			}
			if got := rec.Header().Get("X-Should-Retry") == "true"; got != tc.retry {
				t.Errorf("X-Should-Retry %q", rec.Header().Get("X-Should-Retry"))
			}
			golden := struct {
				Status  int               `json:"status"`
				Headers map[string]string `json:"headers"`
				Body    json.RawMessage   `json:"body"`
			}{Status: rec.Code, Headers: map[string]string{}, Body: rec.Body.Bytes()}
			for _, h := range []string{"Content-Type", "X-Should-Retry", "Retry-After", "Retry-After-Ms"} {
				if v := rec.Header().Get(h); v != "" {
					golden.Headers[h] = v
				}
			}
			b, err := json.Marshal(golden)
			if err != nil {
				t.Fatal(err)
			}
			goldenJSON(t, filepath.Join("errors", string(tc.kind)+".json"), b)
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestWriteModels_Golden(t *testing.T) {
	rec := httptest.NewRecorder()
	Codec{}.WriteModels(rec, surface.Limits{ContextLength: 200000, MaxCompletionTokens: 64000})
	goldenJSON(t, "models.json", rec.Body.Bytes())

	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 3 {
		t.Fatalf("list %s", rec.Body)
	}
	for _, m := range list.Data {
		for _, k := range []string{"id", "object", "owned_by", "root", "context_length", "top_provider", "supported_parameters"} {
			if _, ok := m[k]; !ok {
				t.Errorf("model %v lacks %s", m["id"], k)
			}
		}
		if m["root"] != "svc-fusion" || m["context_length"] != float64(200000) {
			t.Errorf("model %v: root %v context_length %v", m["id"], m["root"], m["context_length"])
		}
		tp, _ := m["top_provider"].(map[string]any)
		if tp["context_length"] != float64(200000) || tp["max_completion_tokens"] != float64(64000) {
			t.Errorf("model %v: top_provider %v", m["id"], tp)
		}
	}

	rec = httptest.NewRecorder()
	Codec{}.WriteModel(rec, "anything-at-all", surface.Limits{ContextLength: 200000, MaxCompletionTokens: 64000})
	var one map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &one); err != nil || one["id"] != "anything-at-all" {
		t.Errorf("WriteModel: %v %s", err, rec.Body)
	}
}
