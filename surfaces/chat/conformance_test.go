package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/svcgw/svcgw/llm"
)

// Conformance with OpenAI's published schema: every body the two codecs
// write — complete replies, each stream chunk and event, error bodies and
// the input-token count — is validated against the components of OpenAI's
// OpenAPI specification that describe it, so that a field the SDKs
// require (and strict decoders check) cannot go missing. The excerpt,
// testdata/openai/schema.json, names the openai/openai-openapi commit it
// came from; testdata/openai/extract.go writes it.

// openAISchema compiles the excerpt once.
var openAISchema = sync.OnceValues(func() (*jsonschema.Compiler, error) {
	f, err := os.Open(filepath.Join("testdata", "openai", "schema.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openai.json", doc); err != nil {
		return nil, err
	}
	return c, nil
})

var (
	compiledMu sync.Mutex
	compiled   = map[string]*jsonschema.Schema{}
)

// component returns the compiled schema of a component of the excerpt.
func component(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if s, ok := compiled[name]; ok {
		return s
	}
	c, err := openAISchema()
	if err != nil {
		t.Fatalf("load the schema excerpt: %v", err)
	}
	s, err := c.Compile("openai.json#/$defs/" + name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	compiled[name] = s
	return s
}

// conforms validates a body against a component.
func conforms(t *testing.T, name string, body []byte) {
	t.Helper()
	if err := validateAgainst(t, name, body); err != nil {
		t.Errorf("not a valid %s: %v\nbody: %s", name, err, bytes.TrimSpace(body))
	}
}

func validateAgainst(t *testing.T, name string, body []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	return component(t, name).Validate(v)
}

// responsesEventSchemas maps each Responses stream event type svcgw emits to
// its component; an event of any other type fails the test.
var responsesEventSchemas = map[string]string{
	"response.created":                       "ResponseCreatedEvent",
	"response.in_progress":                   "ResponseInProgressEvent",
	"response.completed":                     "ResponseCompletedEvent",
	"response.incomplete":                    "ResponseIncompleteEvent",
	"response.failed":                        "ResponseFailedEvent",
	"error":                                  "ResponseErrorEvent",
	"response.output_item.added":             "ResponseOutputItemAddedEvent",
	"response.output_item.done":              "ResponseOutputItemDoneEvent",
	"response.content_part.added":            "ResponseContentPartAddedEvent",
	"response.content_part.done":             "ResponseContentPartDoneEvent",
	"response.output_text.delta":             "ResponseTextDeltaEvent",
	"response.output_text.done":              "ResponseTextDoneEvent",
	"response.reasoning_summary_part.added":  "ResponseReasoningSummaryPartAddedEvent",
	"response.reasoning_summary_part.done":   "ResponseReasoningSummaryPartDoneEvent",
	"response.reasoning_summary_text.delta":  "ResponseReasoningSummaryTextDeltaEvent",
	"response.reasoning_summary_text.done":   "ResponseReasoningSummaryTextDoneEvent",
	"response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaEvent",
	"response.function_call_arguments.done":  "ResponseFunctionCallArgumentsDoneEvent",
}

// conformanceUsage has every count non-zero, so each one is written.
var conformanceUsage = llm.Usage{InputTokens: 2100, CachedInputTokens: 1024, CacheCreationTokens: 512,
	CacheCreation1hTokens: 256, OutputTokens: 90, ReasoningTokens: 30}

// conformanceReplies are complete replies of every shape and finish.
func conformanceReplies(id string) map[string]*llm.Response {
	reply := func(finish llm.FinishReason, parts ...llm.Part) *llm.Response {
		return &llm.Response{ID: id, Model: "svc-fusion", Created: goldenCreated, Content: parts,
			FinishReason: finish, Usage: conformanceUsage}
	}
	stopped := reply(llm.FinishStopSequence, llm.TextPart("Thought: look it up."))
	stopped.StopSequence = "Observation:"
	return map[string]*llm.Response{
		"reasoning, text and a tool call": goldenResponse(id),
		"text":                            reply(llm.FinishStop, llm.TextPart("Hello!")),
		"stop sequence":                   stopped,
		"empty at max tokens":             reply(llm.FinishLength),
		"content filter":                  reply(llm.FinishContentFilter, llm.TextPart("I can't help with that.")),
		"redacted reasoning then two tool calls": reply(llm.FinishToolCalls,
			llm.Part{Type: llm.PartReasoning, Redacted: true, Signature: "sg2.opaque"},
			toolCall("call_1", "get_weather", `{"city":"Paris"}`),
			toolCall("call_2", "get_time", `{}`)),
	}
}

// conformanceStreams are event lists of every shape, each with the error
// that ends it, if any.
var conformanceStreams = map[string]struct {
	events []llm.Event
	fail   *llm.Error
}{
	"reasoning, text and a tool call": {completeEvents, nil},
	"text":                            {textEvents, nil},
	"empty at max tokens":             {emptyEvents, nil},
	"error mid-stream":                {partialEvents, overloaded},
	"stop sequence": {[]llm.Event{
		{Type: llm.EventTextDelta, Text: "Thought: "},
		{Type: llm.EventTextDelta, Text: "look it up."},
		{Type: llm.EventFinish, FinishReason: llm.FinishStopSequence, StopSequence: "Observation:", Usage: &conformanceUsage},
	}, nil},
	"content filter": {[]llm.Event{
		{Type: llm.EventTextDelta, Text: "I can't"},
		{Type: llm.EventFinish, FinishReason: llm.FinishContentFilter, Usage: &conformanceUsage},
	}, nil},
	"two tool calls, no text": {[]llm.Event{
		{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather"}},
		{Type: llm.EventToolCallDelta, Index: 0, Text: `{"city":`},
		{Type: llm.EventToolCallDelta, Index: 0, Text: `"Paris"}`},
		{Type: llm.EventToolCallStart, Index: 1, ToolCall: &llm.ToolCall{ID: "call_2", Name: "get_time"}},
		{Type: llm.EventToolCallDelta, Index: 1, Text: `{}`},
		{Type: llm.EventFinish, FinishReason: llm.FinishToolCalls, Usage: &conformanceUsage},
	}, nil},
	"failure before any output": {nil, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}},
}

// conformanceRequest is a Responses request whose echo fills the request
// fields of a Response: instructions, a function tool, reasoning.
var conformanceRequest = &llm.Request{
	Model:  "svc-fusion",
	System: []llm.Part{llm.TextPart("be brief")},
	Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather", Strict: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}},
	Reasoning:    &llm.Reasoning{Effort: "low", Enabled: true, IncludeThoughts: true},
	MaxTokens:    1024,
	IncludeUsage: true,
}

func TestConformance_ChatCompletion(t *testing.T) {
	for name, resp := range conformanceReplies("chatcmpl-conformance") {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := (Codec{}).WriteResponse(rec, &llm.Request{Model: resp.Model}, resp); err != nil {
				t.Fatal(err)
			}
			conforms(t, "CreateChatCompletionResponse", rec.Body.Bytes())
		})
	}
}

func TestConformance_ChatCompletionChunks(t *testing.T) {
	for name, st := range conformanceStreams {
		for _, includeUsage := range []bool{true, false} {
			t.Run(name, func(t *testing.T) {
				req := &llm.Request{Model: "svc-fusion", Stream: true, IncludeUsage: includeUsage}
				frames := parseSSE(t, runStream(t, Codec{}.NewStream(req, "chatcmpl-conformance", goldenCreated), st.events, st.fail))
				for i, f := range frames {
					switch {
					case f.Data == "[DONE]":
						if i != len(frames)-1 {
							t.Errorf("[DONE] at frame %d of %d", i, len(frames))
						}
					case st.fail != nil && i == len(frames)-1:
						conforms(t, "ErrorResponse", []byte(f.Data)) // the in-stream error frame
					default:
						conforms(t, "CreateChatCompletionStreamResponse", []byte(f.Data))
					}
				}
			})
		}
	}
}

func TestConformance_Response(t *testing.T) {
	for name, resp := range conformanceReplies("resp_conformance") {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := (ResponsesCodec{}).WriteResponse(rec, conformanceRequest, resp); err != nil {
				t.Fatal(err)
			}
			conforms(t, "Response", rec.Body.Bytes())
		})
	}
}

func TestConformance_ResponseStreamEvents(t *testing.T) {
	for name, st := range conformanceStreams {
		t.Run(name, func(t *testing.T) {
			req := *conformanceRequest
			req.Stream = true
			enc := ResponsesCodec{}.newStream(&req, "resp_conformance", goldenCreated)
			enc.now = func() time.Time { return goldenCreated.Add(2 * time.Second) }
			for _, f := range parseSSE(t, runStream(t, enc, st.events, st.fail)) {
				var ev struct {
					Type string `json:"type"`
				}
				frameJSON(t, f, &ev)
				name, ok := responsesEventSchemas[ev.Type]
				if !ok {
					t.Errorf("event %q is not one the excerpt knows: %s", ev.Type, f.Data)
					continue
				}
				conforms(t, name, []byte(f.Data))
			}
		})
	}
}

func TestConformance_ErrorBodies(t *testing.T) {
	kinds := []llm.Kind{llm.KindInvalidRequest, llm.KindAuth, llm.KindPaymentRequired, llm.KindNotFound,
		llm.KindConflict, llm.KindTooLarge, llm.KindRateLimited, llm.KindUpstream, llm.KindOverloaded,
		llm.KindTimeout, llm.KindInternal}
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			rec := httptest.NewRecorder()
			err := &llm.Error{Kind: k, Message: "what went wrong", RetryAfter: time.Second}
			if k == llm.KindInvalidRequest {
				err = llm.InvalidParam("messages.0.content", "messages.0.content is required")
			}
			WriteError(rec, err)
			conforms(t, "ErrorResponse", rec.Body.Bytes())
		})
	}
	t.Run("not an llm.Error", func(t *testing.T) {
		rec := httptest.NewRecorder()
		WriteError(rec, errors.New("boom"))
		conforms(t, "ErrorResponse", rec.Body.Bytes())
	})
}

func TestConformance_ResponsesInputTokens(t *testing.T) {
	rec := httptest.NewRecorder()
	ResponsesCodec{}.CountTokens(rec, httptest.NewRequest("POST", "/v1/responses/input_tokens", nil),
		[]byte(`{"model":"svc-fusion","input":"How many tokens is this?"}`))
	conforms(t, "TokenCountsResource", rec.Body.Bytes())
}

// TestConformance_TheExcerptRejects checks that the validator has teeth:
// bodies with a required field missing, or a value the schema does not
// allow, are refused.
func TestConformance_TheExcerptRejects(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := (ResponsesCodec{}).WriteResponse(rec, conformanceRequest, goldenResponse("resp_conformance")); err != nil {
		t.Fatal(err)
	}
	good := rec.Body.String()
	tests := []struct {
		name, component, old, new string
	}{
		{"Responses usage without cache_write_tokens", "Response", `"cache_write_tokens":4`, `"cache_write_tokens_":4`},
		{"a status the schema does not know", "Response", `"status":"completed"`, `"status":"done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(good, tt.old) {
				t.Fatalf("the body has no %s: %s", tt.old, good)
			}
			if validateAgainst(t, tt.component, []byte(strings.Replace(good, tt.old, tt.new, 1))) == nil {
				t.Errorf("the excerpt accepted a body with %s", tt.new)
			}
		})
	}
}
