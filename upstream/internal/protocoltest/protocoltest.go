// Package protocoltest is what the tests of the protocol backends
// (upstream/openai, upstream/anthropic, upstream/gemini) share: fake
// upstreams that replay a vendor's recorded replies (testdata/<case>.sse or
// .json beside the test) and record the request they got, golden request
// files, folding a reply or a stream into something to compare, and the
// conformance suite every protocol backend passes (Conformance). Tests
// import it; nothing else does.
package protocoltest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

var update = flag.Bool("update", false, "rewrite the golden request files in testdata/")

// canary appears in every replayed upstream id, model name, fingerprint
// and error message; it must appear in nothing a backend returns.
const (
	canary      = "canary"
	canaryModel = "canary-backend-model"
	testKey     = "sk-test-key"
)

// Recorded is a request a fake upstream got.
type Recorded struct {
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Header map[string]string `json:"header"`
	Body   json.RawMessage   `json:"body"`
}

// Fake is an httptest server that records each request and then
// runs its handler, which can read the request's body again.
type Fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Recorded
}

// NewFake starts a fake upstream running h, closed when the test ends.
func NewFake(t *testing.T, h http.HandlerFunc) *Fake {
	t.Helper()
	f := &Fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := Recorded{Method: r.Method, Path: r.URL.RequestURI(), Header: map[string]string{}, Body: body}
		for k := range r.Header {
			switch k {
			case "Content-Length", "Accept-Encoding":
			default:
				rec.Header[k] = r.Header.Get(k)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body)) // for a handler that answers by it
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// Replay returns a fake upstream answering every request with the file
// testdata/<path>: .sse as an event stream written a few bytes at a time
// (so events and lines are split across reads), .json whole.
func Replay(t *testing.T, path string) *Fake {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return NewFake(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(path, ".json") {
			w.Header().Set("Content-Type", "application/json")
			w.Write(data)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		WriteSlowly(w, data)
	})
}

// WriteSlowly writes data in 37-byte pieces, flushing each.
func WriteSlowly(w http.ResponseWriter, data []byte) {
	for len(data) > 0 {
		n := min(37, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		data = data[n:]
	}
}

// Requests returns the requests the fake got.
func (f *Fake) Requests() []Recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Recorded(nil), f.reqs...)
}

// Last returns the last request the fake got.
func (f *Fake) Last(t *testing.T) Recorded {
	t.Helper()
	rs := f.Requests()
	if len(rs) == 0 {
		t.Fatal("the fake upstream got no request")
	}
	return rs[len(rs)-1]
}

// gatewayIDs matches the tool-call ids backends issue, which are random.
var gatewayIDs = regexp.MustCompile(`call_[0-9A-Za-z]{24}`)

// GoldenRequest compares the last request f got with
// testdata/<name>.request.json as JSON values, after replacing gateway-issued
// ids with call_GATEWAY; -update rewrites the file.
func GoldenRequest(t *testing.T, f *Fake, name string) {
	t.Helper()
	rec := f.Last(t)
	var body any
	if err := json.Unmarshal(rec.Body, &body); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, rec.Body)
	}
	rec.Body = mustIndent(t, body)
	var norm any // as the golden file is read: keys sorted
	if err := json.Unmarshal(gatewayIDs.ReplaceAll(mustIndent(t, rec), []byte("call_GATEWAY")), &norm); err != nil {
		t.Fatal(err)
	}
	got := mustIndent(t, norm)
	path := filepath.Join("testdata", name+".request.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s (run with -update to create it): %v", path, err)
	}
	var w any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	if wantN := mustIndent(t, w); !bytes.Equal(wantN, got) {
		t.Errorf("request differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, wantN)
	}
}

func mustIndent(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// Options are the HTTPOptions of a backend talking to f.
func Options(f *Fake, base string) upstream.HTTPOptions {
	return upstream.HTTPOptions{
		BaseURL: f.URL + base,
		APIKey:  testKey,
		Model:   canaryModel,
		Limits:  upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 16000},
	}
}

// ToolCall is one tool call of a reply.
type ToolCall struct {
	ID, Name, Args, Signature string
}

// Reply is what a response or a stream adds up to.
type Reply struct {
	Reasoning    string
	Signatures   []string
	Text         string
	Calls        []ToolCall
	Finish       llm.FinishReason
	StopSequence string
	Usage        llm.Usage
}

// ReplyOf is what a response adds up to.
func ReplyOf(resp *llm.Response) Reply {
	r := Reply{Finish: resp.FinishReason, StopSequence: resp.StopSequence, Usage: resp.Usage}
	for _, p := range resp.Content {
		switch p.Type {
		case llm.PartReasoning:
			r.Reasoning += p.Text
			if p.Signature != "" {
				r.Signatures = append(r.Signatures, p.Signature)
			}
		case llm.PartText:
			r.Text += p.Text
		case llm.PartToolCall:
			r.Calls = append(r.Calls, ToolCall{p.ToolCall.ID, p.ToolCall.Name, string(p.ToolCall.Arguments), p.ToolCall.Signature})
		}
	}
	return r
}

// Drain reads a stream to its end.
func Drain(s upstream.Stream) ([]llm.Event, error) {
	defer s.Close()
	var evs []llm.Event
	for s.Next() {
		evs = append(evs, s.Event())
	}
	return evs, s.Err()
}

// ReplyOfEvents folds events, checking the stream's shape: tool calls
// start before their fragments, indexes count from 0, and the finish
// event is last.
func ReplyOfEvents(t *testing.T, evs []llm.Event) Reply {
	t.Helper()
	var r Reply
	for i, ev := range evs {
		switch ev.Type {
		case llm.EventReasoningDelta:
			r.Reasoning += ev.Text
			if ev.Signature != "" {
				r.Signatures = append(r.Signatures, ev.Signature)
			}
		case llm.EventTextDelta:
			r.Text += ev.Text
		case llm.EventToolCallStart:
			if ev.Index != len(r.Calls) {
				t.Fatalf("tool call start with index %d after %d calls", ev.Index, len(r.Calls))
			}
			r.Calls = append(r.Calls, ToolCall{ID: ev.ToolCall.ID, Name: ev.ToolCall.Name, Signature: ev.ToolCall.Signature})
		case llm.EventToolCallDelta:
			if ev.Index >= len(r.Calls) {
				t.Fatalf("fragment for tool call %d before its start", ev.Index)
			}
			r.Calls[ev.Index].Args += ev.Text
		case llm.EventFinish:
			if i != len(evs)-1 {
				t.Fatalf("finish event at %d of %d", i, len(evs))
			}
			r.Finish, r.StopSequence = ev.FinishReason, ev.StopSequence
			if ev.Usage != nil {
				r.Usage = *ev.Usage
			}
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != llm.EventFinish {
		t.Fatalf("stream did not end with a finish event: %+v", evs)
	}
	return r
}

// PartsOfEvents rebuilds the assistant turn a caller would send back from
// a stream: reasoning deltas make one part until a signature closes it.
func PartsOfEvents(evs []llm.Event) []llm.Part {
	var out []llm.Part
	calls := map[int]int{} // event index → part position
	for _, ev := range evs {
		n := len(out)
		switch ev.Type {
		case llm.EventReasoningDelta:
			if n > 0 && out[n-1].Type == llm.PartReasoning && out[n-1].Signature == "" {
				out[n-1].Text += ev.Text
				out[n-1].Signature = ev.Signature
			} else {
				out = append(out, llm.Part{Type: llm.PartReasoning, Text: ev.Text, Signature: ev.Signature})
			}
		case llm.EventTextDelta:
			if n > 0 && out[n-1].Type == llm.PartText {
				out[n-1].Text += ev.Text
			} else {
				out = append(out, llm.TextPart(ev.Text))
			}
		case llm.EventToolCallStart:
			tc := *ev.ToolCall
			calls[ev.Index] = n
			out = append(out, llm.Part{Type: llm.PartToolCall, ToolCall: &tc})
		case llm.EventToolCallDelta:
			p := out[calls[ev.Index]].ToolCall
			p.Arguments = append(p.Arguments, ev.Text...)
		}
	}
	return out
}

// RunCall runs req on b to the end: streamed when req.Stream is set.
func RunCall(t *testing.T, b upstream.Backend, req *llm.Request) error {
	t.Helper()
	if !req.Stream {
		_, err := b.Complete(Context(t), req)
		return err
	}
	s, err := b.Stream(Context(t), req)
	if err != nil {
		return err
	}
	_, err = Drain(s)
	return err
}

// NoLeak fails when anything in v mentions the canary: upstream ids,
// model names, fingerprints and vendor messages must not come through.
func NoLeak(t *testing.T, what string, v any) {
	t.Helper()
	var s string
	switch x := v.(type) {
	case *llm.Error:
		s = x.Message + " " + x.Param // Err is for operator logs
	default:
		b, _ := json.Marshal(v)
		s = string(b) + fmt.Sprintf("%+v", v)
	}
	if strings.Contains(strings.ToLower(s), canary) {
		t.Errorf("%s leaks the upstream: %s", what, s)
	}
}

// LLMError returns err as an *llm.Error, failing the test otherwise.
func LLMError(t *testing.T, err error) *llm.Error {
	t.Helper()
	le, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return le
}

// Context is a test's context with a deadline, so a hung test fails.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// CityWeather is the tool most tests offer.
var CityWeather = llm.Tool{
	Name:        "get_weather",
	Description: "Current weather of a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

// ToolLoop returns a request that continues a conversation after the
// assistant turn assistant, answering each of its tool calls.
func ToolLoop(assistant []llm.Part, tools ...llm.Tool) *llm.Request {
	req := &llm.Request{
		Model: "svc-fusion",
		Tools: tools,
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("What is the weather in Paris?")}},
			{Role: llm.RoleAssistant, Parts: assistant},
		},
	}
	var results []llm.Part
	for _, p := range assistant {
		if p.Type == llm.PartToolCall {
			results = append(results, llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{
				CallID: p.ToolCall.ID, Content: []llm.Part{llm.TextPart(`{"temp_c":18}`)},
			}})
		}
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: results})
	return req
}

// PNG is a tiny image's bytes (the backends never decode them).
var PNG = []byte("\x89PNG\r\n\x1a\nfake")

// pdf is a tiny PDF's bytes.
var pdf = []byte("%PDF-1.7 fake")

// RichRequest exercises the request translation: system prompt with a
// cache breakpoint, text, images (inline and, unless inlineOnly, by URL),
// a PDF, sampling parameters and an output cap above the model's limit.
func RichRequest(inlineOnly bool) *llm.Request {
	temp, topP, topK, seed := 0.3, 0.9, 40, int64(7)
	user := []llm.Part{
		llm.TextPart("Describe these & tell me: <capital>?"),
		{Type: llm.PartImage, MediaType: "image/png", Data: PNG},
	}
	if !inlineOnly {
		user = append(user, llm.Part{Type: llm.PartImage, URL: "https://example.com/cat.jpg"})
	}
	user = append(user, llm.Part{Type: llm.PartDocument, MediaType: "application/pdf", Data: pdf, Title: "brief.pdf",
		CacheControl: &llm.CacheControl{TTL: "5m"}})
	return &llm.Request{
		Model: "svc-fusion",
		System: []llm.Part{
			llm.TextPart("You are terse."),
			{Type: llm.PartText, Text: "Answer in English.", CacheControl: &llm.CacheControl{TTL: "1h"}},
		},
		Messages:     []llm.Message{{Role: llm.RoleUser, Parts: user}},
		MaxTokens:    99999,
		Temperature:  &temp,
		TopP:         &topP,
		TopK:         &topK,
		Seed:         &seed,
		Stop:         []string{"END"},
		User:         "user-42",
		IncludeUsage: false,
	}
}

// FailedCall is a tool loop whose one call failed with text.
func FailedCall(text string) *llm.Request {
	r := ToolLoop([]llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather",
		Arguments: json.RawMessage(`{"city":"Atlantis"}`)}}}, CityWeather)
	res := r.Messages[2].Parts[0].ToolResult
	res.Content, res.IsError = []llm.Part{llm.TextPart(text)}, true
	return r
}

// GuidedRequest is a conversation with system guidance inside it (a messages caller's
// mid-conversation system messages, as Claude Code sends them): after the
// first user turn, and between a tool call and its result's turn.
func GuidedRequest() *llm.Request {
	user := func(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(s)}} }
	guide := func(s string) llm.Message {
		return llm.Message{Role: llm.RoleSystem, Parts: []llm.Part{llm.TextPart(s)}}
	}
	call := &llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	return &llm.Request{
		System: []llm.Part{llm.TextPart("Be brief.")},
		Messages: []llm.Message{
			user("Weather in Paris?"),
			guide("Working directory: /tmp"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: call}}},
			guide("Plan mode is off."),
			{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "call_1", Content: []llm.Part{llm.TextPart("sunny")}}}}},
			guide("Today is Monday."),
		},
		Tools: []llm.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
}
