package chat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

func ptr[T any](v T) *T { return &v }

// chatBody is a minimal valid chat-completions body with extra top-level
// fields spliced in.
func chatBody(extra string) string {
	b := `{"model":"svc-fusion","messages":[{"role":"user","content":"hi"}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// chatReq is the canonical form of chatBody, adjusted by edit.
func chatReq(edit func(r *llm.Request)) *llm.Request {
	r := &llm.Request{
		Model:    "svc-fusion",
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}},
	}
	if edit != nil {
		edit(r)
	}
	return r
}

func user(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleUser, Parts: parts} }

func assistant(parts ...llm.Part) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: parts}
}

func toolCall(id, name, args string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}}
}

func toolResult(callID, name, text string) llm.Part {
	return llm.Part{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: callID, Name: name, Content: []llm.Part{llm.TextPart(text)}}}
}

// pdfDataURL is a (tiny, not necessarily renderable) PDF as a data URL.
const (
	pdfBytes   = "%PDF-1.4\n%%EOF\n"
	pdfDataURL = "data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK"
	pngDataURL = "data:image/png;base64,iVBORw0KGgo="
)

var pngBytes = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}

// chatDecodeCases are valid chat-completions bodies and the canonical
// requests they decode to. The fuzz target reuses the bodies as seeds.
var chatDecodeCases = []struct {
	name string
	body string
	want *llm.Request
}{
	{
		name: "string content",
		body: chatBody(""),
		want: chatReq(nil),
	},
	{
		name: "array content of text parts",
		body: `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		want: &llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{user(llm.TextPart("a"), llm.TextPart("b"))}},
	},
	{
		name: "image_url data URL",
		body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"` + pngDataURL + `","detail":"high"}}]}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{user(llm.TextPart("what is this?"), llm.Part{Type: llm.PartImage, MediaType: "image/png", Data: pngBytes})}},
	},
	{
		name: "image_url https URL",
		body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{user(llm.Part{Type: llm.PartImage, URL: "https://example.com/cat.jpg"})}},
	},
	{
		name: "file PDF as data URL",
		body: `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"report.pdf","file_data":"` + pdfDataURL + `"}},{"type":"text","text":"summarize"}]}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{user(
			llm.Part{Type: llm.PartDocument, MediaType: "application/pdf", Data: []byte(pdfBytes), Title: "report.pdf"},
			llm.TextPart("summarize"))}},
	},
	{
		name: "system and developer messages hoisted in order",
		body: `{"model":"m","messages":[
			{"role":"system","content":"be brief"},
			{"role":"user","content":"hi"},
			{"role":"developer","content":[{"type":"text","text":"use metric units"}]}]}`,
		want: &llm.Request{Model: "m",
			System:   []llm.Part{llm.TextPart("be brief"), llm.TextPart("use metric units")},
			Messages: []llm.Message{user(llm.TextPart("hi"))}},
	},
	{
		// openai-node's "create: only required params" sends exactly this.
		name: "a developer message alone",
		body: `{"model":"m","messages":[{"role":"developer","content":"string"}]}`,
		want: &llm.Request{Model: "m", System: []llm.Part{llm.TextPart("string")}},
	},
	{
		name: "assistant tool calls then tool messages merged into one turn",
		body: `{"model":"m","messages":[
			{"role":"user","content":"weather in Paris and Rome?"},
			{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"18C"},
			{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"22C"}]},
			{"role":"user","content":"thanks"}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{
			user(llm.TextPart("weather in Paris and Rome?")),
			assistant(toolCall("call_1", "get_weather", `{"city":"Paris"}`), toolCall("call_2", "get_weather", `{"city":"Rome"}`)),
			turns(2, user(toolResult("call_1", "", "18C"), toolResult("call_2", "", "22C"))),
			user(llm.TextPart("thanks")),
		}},
	},
	{
		name: "assistant text beside tool calls; empty content string dropped",
		body: `{"model":"m","messages":[
			{"role":"user","content":"go"},
			{"role":"assistant","content":"Checking.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]},
			{"role":"tool","tool_call_id":"c1","content":"ok"},
			{"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c2","content":"ok"}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{
			user(llm.TextPart("go")),
			assistant(llm.TextPart("Checking."), toolCall("c1", "f", `{}`)),
			user(toolResult("c1", "", "ok")),
			assistant(toolCall("c2", "f", `{}`)),
			user(toolResult("c2", "", "ok")),
		}},
	},
	{
		name: "assistant content parts with a refusal replayed",
		body: `{"model":"m","messages":[
			{"role":"user","content":"x"},
			{"role":"assistant","content":[{"type":"text","text":"No."},{"type":"refusal","refusal":"I can't help with that."}]},
			{"role":"user","content":"ok"}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{
			user(llm.TextPart("x")),
			assistant(llm.TextPart("No."), llm.TextPart("I can't help with that.")),
			user(llm.TextPart("ok")),
		}},
	},
	{
		name: "legacy function role matched by name",
		body: `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"function","name":"lookup","content":"42"}]}`,
		want: &llm.Request{Model: "m", Messages: []llm.Message{
			user(llm.TextPart("x")),
			user(toolResult("lookup", "lookup", "42")),
		}},
	},
	{
		name: "stream",
		body: chatBody(`"stream":true`),
		want: chatReq(func(r *llm.Request) { r.Stream = true }),
	},
	{
		name: "stream_options include_usage",
		body: chatBody(`"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}`),
		want: chatReq(func(r *llm.Request) { r.Stream, r.IncludeUsage = true, true }),
	},
	{
		name: "stream_options without include_usage",
		body: chatBody(`"stream":true,"stream_options":{}`),
		want: chatReq(func(r *llm.Request) { r.Stream = true }),
	},
	{
		name: "tools",
		body: chatBody(`"tools":[
			{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}},
			{"type":"function","function":{"name":"now"}},
			{"type":"function","function":{"name":"nil_params","parameters":null}}]`),
		want: chatReq(func(r *llm.Request) {
			r.Tools = []llm.Tool{
				{Name: "get_weather", Description: "Current weather", Strict: true,
					Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
				{Name: "now"},
				{Name: "nil_params"},
			}
		}),
	},
	{
		name: "tool_choice none",
		body: chatBody(`"tool_choice":"none"`),
		want: chatReq(func(r *llm.Request) { r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceNone} }),
	},
	{
		name: "tool_choice auto",
		body: chatBody(`"tool_choice":"auto"`),
		want: chatReq(func(r *llm.Request) { r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceAuto} }),
	},
	{
		name: "tool_choice required",
		body: chatBody(`"tool_choice":"required"`),
		want: chatReq(func(r *llm.Request) { r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired} }),
	},
	{
		name: "tool_choice naming a function",
		body: chatBody(`"tool_choice":{"type":"function","function":{"name":"get_weather"}}`),
		want: chatReq(func(r *llm.Request) { r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"} }),
	},
	{
		name: "tool_choice allowed_tools required",
		body: chatBody(`"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]}}`),
		want: chatReq(func(r *llm.Request) {
			r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired, Allowed: []string{"a", "b"}}
		}),
	},
	{
		name: "tool_choice null",
		body: chatBody(`"tool_choice":null`),
		want: chatReq(nil),
	},
	{
		name: "parallel_tool_calls false",
		body: chatBody(`"parallel_tool_calls":false`),
		want: chatReq(func(r *llm.Request) { r.ParallelToolCalls = ptr(false) }),
	},
	{
		name: "response_format json_schema",
		body: chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"person","description":"a person","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},"strict":true}}`),
		want: chatReq(func(r *llm.Request) {
			r.ResponseFormat = &llm.ResponseFormat{Name: "person", Strict: true,
				Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
		}),
	},
	{
		name: "response_format json_object",
		body: chatBody(`"response_format":{"type":"json_object"}`),
		want: chatReq(func(r *llm.Request) { r.ResponseFormat = &llm.ResponseFormat{} }),
	},
	{
		name: "response_format text",
		body: chatBody(`"response_format":{"type":"text"}`),
		want: chatReq(nil),
	},
	{
		name: "temperature and top_p",
		body: chatBody(`"temperature":0.2,"top_p":0.9`),
		want: chatReq(func(r *llm.Request) { r.Temperature, r.TopP = ptr(0.2), ptr(0.9) }),
	},
	{
		name: "temperature zero is kept",
		body: chatBody(`"temperature":0`),
		want: chatReq(func(r *llm.Request) { r.Temperature = ptr(0.0) }),
	},
	{
		name: "max_tokens",
		body: chatBody(`"max_tokens":100`),
		want: chatReq(func(r *llm.Request) { r.MaxTokens = 100 }),
	},
	{
		name: "max_completion_tokens",
		body: chatBody(`"max_completion_tokens":200`),
		want: chatReq(func(r *llm.Request) { r.MaxTokens = 200 }),
	},
	{
		name: "max_completion_tokens wins over max_tokens",
		body: chatBody(`"max_tokens":100,"max_completion_tokens":200`),
		want: chatReq(func(r *llm.Request) { r.MaxTokens = 200 }),
	},
	{
		name: "n of 1",
		body: chatBody(`"n":1`),
		want: chatReq(func(r *llm.Request) { r.N = 1 }),
	},
	{
		name: "stop string",
		body: chatBody(`"stop":"END"`),
		want: chatReq(func(r *llm.Request) { r.Stop = []string{"END"} }),
	},
	{
		name: "stop array",
		body: chatBody(`"stop":["END","\n\n"]`),
		want: chatReq(func(r *llm.Request) { r.Stop = []string{"END", "\n\n"} }),
	},
	{
		name: "stop null",
		body: chatBody(`"stop":null`),
		want: chatReq(nil),
	},
	{
		name: "presence and frequency penalties",
		body: chatBody(`"presence_penalty":0.5,"frequency_penalty":-0.5`),
		want: chatReq(func(r *llm.Request) { r.PresencePenalty, r.FrequencyPenalty = ptr(0.5), ptr(-0.5) }),
	},
	{
		name: "logit_bias",
		body: chatBody(`"logit_bias":{"50256":-100,"15":2.5}`),
		want: chatReq(func(r *llm.Request) { r.LogitBias = map[string]float64{"50256": -100, "15": 2.5} }),
	},
	{
		name: "logprobs and top_logprobs",
		body: chatBody(`"logprobs":true,"top_logprobs":3`),
		want: chatReq(func(r *llm.Request) { r.Logprobs, r.TopLogprobs = true, ptr(3) }),
	},
	{
		name: "seed",
		body: chatBody(`"seed":42`),
		want: chatReq(func(r *llm.Request) { r.Seed = ptr(int64(42)) }),
	},
	{
		name: "user",
		body: chatBody(`"user":"user-1234"`),
		want: chatReq(func(r *llm.Request) { r.User = "user-1234" }),
	},
	{
		name: "reasoning_effort",
		body: chatBody(`"reasoning_effort":"high"`),
		want: chatReq(func(r *llm.Request) {
			r.Reasoning = &llm.Reasoning{Effort: "high", Enabled: true, IncludeThoughts: true}
		}),
	},
	{
		name: "reasoning_effort none turns reasoning off",
		body: chatBody(`"reasoning_effort":"none"`),
		want: chatReq(func(r *llm.Request) { r.Reasoning = &llm.Reasoning{Effort: "none", IncludeThoughts: true} }),
	},
	{
		name: "reasoning object with budget and exclude",
		body: chatBody(`"reasoning":{"effort":"medium","max_tokens":2048,"exclude":true}`),
		want: chatReq(func(r *llm.Request) {
			r.Reasoning = &llm.Reasoning{Effort: "medium", BudgetTokens: 2048, Enabled: true}
		}),
	},
	{
		name: "reasoning object overrides reasoning_effort",
		body: chatBody(`"reasoning_effort":"low","reasoning":{"effort":"high"}`),
		want: chatReq(func(r *llm.Request) {
			r.Reasoning = &llm.Reasoning{Effort: "high", Enabled: true, IncludeThoughts: true}
		}),
	},
	{
		name: "reasoning object disabled",
		body: chatBody(`"reasoning":{"enabled":false}`),
		want: chatReq(func(r *llm.Request) { r.Reasoning = &llm.Reasoning{IncludeThoughts: true} }),
	},
	{
		name: "cache_control on request, part, message and tool",
		body: `{"model":"m","cache_control":{"type":"ephemeral"},
			"messages":[
				{"role":"system","content":"long system prompt","cache_control":{"type":"ephemeral","ttl":"1h"}},
				{"role":"user","content":[{"type":"text","text":"doc","cache_control":{"type":"ephemeral"}},{"type":"text","text":"q"}]}],
			"tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]}`,
		want: &llm.Request{Model: "m",
			CacheControl: &llm.CacheControl{TTL: "5m"},
			System:       []llm.Part{{Type: llm.PartText, Text: "long system prompt", CacheControl: &llm.CacheControl{TTL: "1h"}}},
			Messages: []llm.Message{user(
				llm.Part{Type: llm.PartText, Text: "doc", CacheControl: &llm.CacheControl{TTL: "5m"}},
				llm.TextPart("q"))},
			Tools: []llm.Tool{{Name: "f", CacheControl: &llm.CacheControl{TTL: "5m"}}},
		},
	},
	{
		name: "unknown fields are ignored",
		body: chatBody(`"metadata":{"a":"b"},"store":false,"service_tier":"auto","prompt_cache_key":"k","some_future_field":[1,2]`),
		want: chatReq(func(r *llm.Request) { r.CacheKey = "k" }), // the cache hint is kept, to be scoped to the account
	},
}

func TestDecodeChat(t *testing.T) {
	for _, tc := range chatDecodeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Codec{}.DecodeRequest(httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), []byte(tc.body))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("canonical request mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// errorEnvelope is what WriteError wrote, with the presence of each of the
// four keys recorded: openai-go loses the typed error when one is missing.
type errorEnvelope struct {
	Status  int
	Message string
	Type    string
	Param   *string
	Code    *string
	Keys    []string
}

func writeErrorEnvelope(t *testing.T, err error) errorEnvelope {
	t.Helper()
	rec := httptest.NewRecorder()
	WriteError(rec, err)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatalf("error body is not an envelope: %v: %s", err, rec.Body)
	}
	if len(raw) != 1 {
		t.Errorf("error body has top-level keys other than error: %s", rec.Body)
	}
	env := errorEnvelope{Status: rec.Code}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; ok {
			env.Keys = append(env.Keys, k)
		}
	}
	var obj struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &obj); err != nil {
		t.Fatalf("decode envelope: %v", err)
	}
	env.Message, env.Type, env.Param, env.Code = obj.Error.Message, obj.Error.Type, obj.Error.Param, obj.Error.Code
	return env
}

// badRequest checks that err is a 400 invalid_request_error naming param
// ("" for none, which must be null on the wire).
func badRequest(t *testing.T, err error, param string) {
	t.Helper()
	if err == nil {
		t.Fatal("decoded without error")
	}
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindInvalidRequest {
		t.Fatalf("error %v is not an invalid_request *llm.Error", err)
	}
	env := writeErrorEnvelope(t, err)
	is := is.New(t)
	is.Equal(env.Status, http.StatusBadRequest)                           // status
	is.Equal(env.Keys, []string{"message", "type", "param", "code"})      // all four keys present
	is.Equal(env.Type, "invalid_request_error")                           // type
	is.True(env.Message != "")                                            // message
	is.True(!strings.Contains(strings.ToLower(env.Message), "go struct")) // no Go internals in the message
	if param == "" {
		is.Equal(env.Param, nil) // param is null
	} else {
		is.True(env.Param != nil) // param set
		if env.Param != nil {
			is.Equal(*env.Param, param) // param names the field
		}
	}
}

// chatErrorCases are bodies the chat decoder must refuse with a 400 that
// names param.
var chatErrorCases = []struct {
	name  string
	body  string
	param string
}{
	{"malformed JSON", `{"model":"m","messages":[`, ""},
	{"trailing garbage", `{"model":"m","messages":[{"role":"user","content":"hi"}]} x`, ""},
	{"empty body", ``, ""},
	{"body is an array", `[]`, "body"},
	{"missing model", `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
	{"model not a string", `{"model":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
	{"missing messages", `{"model":"m"}`, "messages"},
	{"empty messages", `{"model":"m","messages":[]}`, "messages"},
	{"null messages", `{"model":"m","messages":null}`, "messages"},
	{"messages not an array", `{"model":"m","messages":"hi"}`, "messages"},
	{"missing role", `{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role"},
	{"unknown role", `{"model":"m","messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role"},
	{"role not a string", `{"model":"m","messages":[{"role":5,"content":"hi"}]}`, "messages.role"},
	{"content a number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages.content"},
	{"content an object", `{"model":"m","messages":[{"role":"user","content":{"text":"hi"}}]}`, "messages.content"},
	{"image_url a string", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/y.png"}]}]}`, "messages.content.image_url"},
	{"user content null", `{"model":"m","messages":[{"role":"user","content":null}]}`, "messages[0].content"},
	{"user content missing", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content"},
	{"user content empty array", `{"model":"m","messages":[{"role":"user","content":[]}]}`, "messages[0].content"},
	{"content part without type", `{"model":"m","messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages[0].content[0].type"},
	{"unknown content part type", `{"model":"m","messages":[{"role":"user","content":[{"type":"video","text":"hi"}]}]}`, "messages[0].content[0].type"},
	{"audio input", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages[0].content[0]"},
	{"image in a system message", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"hi"}]}`, "messages[0].content[0]"},
	{"image_url without url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url"},
	{"image_url not a URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url"},
	{"data URL without base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url"},
	{"data URL without comma", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64"}}]}]}`, "messages[0].content[0].image_url.url"},
	{"data URL with bad base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!!"}}]}]}`, "messages[0].content[0].image_url.url"},
	{"image data URL of another media type", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pdfDataURL + `"}}]}]}`, "messages[0].content[0].image_url.url"},
	{"file without file object", `{"model":"m","messages":[{"role":"user","content":[{"type":"file"}]}]}`, "messages[0].content[0].file"},
	{"file_id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc123"}}]}]}`, "messages[0].content[0].file.file_id"},
	{"file without file_data", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf"}}]}]}`, "messages[0].content[0].file.file_data"},
	{"file that is not a PDF", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.txt","file_data":"data:text/plain;base64,aGk="}}]}]}`, "messages[0].content[0].file.file_data"},
	{"file_data not a data URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"JVBERi0xLjQK"}}]}]}`, "messages[0].content[0].file.file_data"},
	{"tool message without tool_call_id", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"y"}]}`, "messages[1].tool_call_id"},
	{"assistant message with nothing", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant"}]}`, "messages[1].content"},
	{"assistant tool call without id", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[1].tool_calls[0]"},
	{"assistant tool call arguments not JSON", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{city:"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
	{"assistant tool call arguments not an object", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
	{"tool call arguments as an object", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages.tool_calls.function.arguments"},
	{"stream not a boolean", chatBody(`"stream":"yes"`), "stream"},
	{"stream_options without stream", chatBody(`"stream_options":{"include_usage":true}`), "stream_options"},
	{"stream_options with stream false", chatBody(`"stream":false,"stream_options":{"include_usage":true}`), "stream_options"},
	{"stream_options not an object", chatBody(`"stream":true,"stream_options":true`), "stream_options"},
	{"temperature a string", chatBody(`"temperature":"hot"`), "temperature"},
	{"top_p a string", chatBody(`"top_p":"x"`), "top_p"},
	{"max_tokens fractional", chatBody(`"max_tokens":1.5`), "max_tokens"},
	{"max_tokens negative", chatBody(`"max_tokens":-1`), "max_tokens"},
	{"max_tokens zero", chatBody(`"max_tokens":0`), "max_tokens"}, // as OpenAI: >= 1, not "unset"
	{"max_completion_tokens zero", chatBody(`"max_completion_tokens":0`), "max_completion_tokens"},
	{"max_completion_tokens negative", chatBody(`"max_completion_tokens":-5`), "max_completion_tokens"},
	{"n greater than 1", chatBody(`"n":2`), "n"},
	{"n zero", chatBody(`"n":0`), "n"},
	{"n a string", chatBody(`"n":"1"`), "n"},
	{"stop a number", chatBody(`"stop":5`), "stop"},
	{"stop array of numbers", chatBody(`"stop":[1,2]`), "stop"},
	{"stop more than four", chatBody(`"stop":["a","b","c","d","e"]`), "stop"},
	{"presence_penalty a string", chatBody(`"presence_penalty":"x"`), "presence_penalty"},
	{"frequency_penalty a bool", chatBody(`"frequency_penalty":true`), "frequency_penalty"},
	{"logit_bias an array", chatBody(`"logit_bias":[1]`), "logit_bias"},
	{"logprobs a string", chatBody(`"logprobs":"yes"`), "logprobs"},
	{"top_logprobs a string", chatBody(`"top_logprobs":"3"`), "top_logprobs"},
	{"seed fractional", chatBody(`"seed":1.5`), "seed"},
	{"user a number", chatBody(`"user":5`), "user"},
	{"tools not an array", chatBody(`"tools":{}`), "tools"},
	{"tool of another type", chatBody(`"tools":[{"type":"retrieval"}]`), "tools[0].type"},
	{"tool without a name", chatBody(`"tools":[{"type":"function","function":{"description":"x"}}]`), "tools[0].function.name"},
	{"tool parameters not an object", chatBody(`"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]`), "tools[0].function.parameters"},
	{"tool_choice unknown string", chatBody(`"tool_choice":"sometimes"`), "tool_choice"},
	{"tool_choice a number", chatBody(`"tool_choice":5`), "tool_choice"},
	{"tool_choice function without a name", chatBody(`"tool_choice":{"type":"function"}`), "tool_choice"},
	{"tool_choice of unknown type", chatBody(`"tool_choice":{"type":"magic"}`), "tool_choice.type"},
	{"parallel_tool_calls a string", chatBody(`"parallel_tool_calls":"no"`), "parallel_tool_calls"},
	{"response_format of unknown type", chatBody(`"response_format":{"type":"xml"}`), "response_format.type"},
	{"response_format json_schema missing", chatBody(`"response_format":{"type":"json_schema"}`), "response_format.json_schema"},
	{"response_format schema not an object", chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":"string"}}`), "response_format.json_schema.schema"},
	{"response_format a string", chatBody(`"response_format":"json"`), "response_format"},
	{"reasoning_effort unknown", chatBody(`"reasoning_effort":"extreme"`), "reasoning_effort"},
	{"reasoning_effort a number", chatBody(`"reasoning_effort":3`), "reasoning_effort"},
	{"reasoning.effort unknown", chatBody(`"reasoning":{"effort":"extreme"}`), "reasoning.effort"},
	{"reasoning not an object", chatBody(`"reasoning":"high"`), "reasoning"},
}

func TestDecodeChat_Errors(t *testing.T) {
	for _, tc := range chatErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeChat([]byte(tc.body))
			if err == nil {
				t.Fatalf("decoded to %+v, want a 400 naming %q", req, tc.param)
			}
			badRequest(t, err, tc.param)
		})
	}
}

// responsesBody is a minimal Responses body with extra fields spliced in.
func responsesBody(extra string) string {
	b := `{"model":"svc-fusion","input":"hi"`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

func responsesReq(edit func(r *llm.Request)) *llm.Request {
	r := chatReq(nil)
	r.IncludeUsage = true // a Response always carries usage
	if edit != nil {
		edit(r)
	}
	return r
}

var responsesDecodeCases = []struct {
	name string
	body string
	want *llm.Request
}{
	{
		// As Codex sends them: a namespace of function tools, a custom
		// (freeform) tool, and hosted tools, which are dropped.
		name: "namespace, custom and hosted tools",
		body: responsesBody(`"tools":[
			{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
				{"type":"function","name":"spawn_agent","description":"Start one.","strict":false,"parameters":{"type":"object","properties":{"task":{"type":"string"}},"required":["task"]}}]},
			{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: patch"}},
			{"type":"web_search","external_web_access":false},
			{"type":"tool_search","execution":"client","description":"Find tools."},
			{"type":"function","name":"exec_command","parameters":{"type":"object"}}],
			"tool_choice":{"type":"web_search"}`),
		want: responsesReq(func(r *llm.Request) {
			r.Tools = []llm.Tool{
				{Name: "multi_agent_v1__spawn_agent", Namespace: "multi_agent_v1", Description: "Sub-agents.\n\nStart one.",
					Parameters: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string"}},"required":["task"]}`)},
				{Name: "apply_patch", Freeform: true, Description: "Edit files.",
					Parameters: json.RawMessage(`{"additionalProperties":false,"properties":{"input":{"description":"The tool's input, as raw text matching this lark grammar:\nstart: patch","type":"string"}},"required":["input"],"type":"object"}`)},
				{Name: "exec_command", Parameters: json.RawMessage(`{"type":"object"}`)},
			}
			r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceAuto}
		}),
	},
	{
		name: "namespaced and custom calls replayed; hosted items dropped",
		body: `{"model":"svc-fusion","input":[{"role":"user","content":"hi"},
			{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}},
			{"type":"function_call","call_id":"c1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{\"task\":\"x\"}"},
			{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch"},
			{"type":"function_call_output","call_id":"c1","output":"started"},
			{"type":"custom_tool_call_output","call_id":"c2","output":"Done!"}]}`,
		want: responsesReq(func(r *llm.Request) {
			r.Messages = append(r.Messages,
				llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c1", Name: "multi_agent_v1__spawn_agent", Arguments: json.RawMessage(`{"task":"x"}`)}},
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c2", Name: "apply_patch", Arguments: json.RawMessage(`{"input":"*** Begin Patch"}`)}},
				}, Turns: 2},
				llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
					{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c1", Content: []llm.Part{llm.TextPart("started")}}},
					{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c2", Content: []llm.Part{llm.TextPart("Done!")}}},
				}, Turns: 2})
		}),
	},
	{
		name: "string input",
		body: responsesBody(""),
		want: responsesReq(nil),
	},
	{
		name: "instructions become the system prompt",
		body: responsesBody(`"instructions":"be brief"`),
		want: responsesReq(func(r *llm.Request) { r.System = []llm.Part{llm.TextPart("be brief")} }),
	},
	{
		name: "a developer message alone",
		body: `{"model":"m","input":[{"role":"developer","content":"string"}]}`,
		want: &llm.Request{Model: "m", IncludeUsage: true, System: []llm.Part{llm.TextPart("string")}},
	},
	{
		name: "message items with and without type",
		body: `{"model":"m","input":[
			{"role":"developer","content":"use metric units"},
			{"type":"message","role":"user","content":[
				{"type":"input_text","text":"what is this?"},
				{"type":"input_image","image_url":"` + pngDataURL + `","detail":"auto"},
				{"type":"input_image","image_url":"https://example.com/cat.jpg"},
				{"type":"input_file","filename":"a.pdf","file_data":"` + pdfDataURL + `"}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat.","annotations":[]}]},
			{"role":"user","content":"thanks"}]}`,
		want: &llm.Request{Model: "m", IncludeUsage: true,
			System: []llm.Part{llm.TextPart("use metric units")},
			Messages: []llm.Message{
				user(llm.TextPart("what is this?"),
					llm.Part{Type: llm.PartImage, MediaType: "image/png", Data: pngBytes},
					llm.Part{Type: llm.PartImage, URL: "https://example.com/cat.jpg"},
					llm.Part{Type: llm.PartDocument, MediaType: "application/pdf", Data: []byte(pdfBytes), Title: "a.pdf"}),
				assistant(llm.TextPart("A cat.")),
				user(llm.TextPart("thanks")),
			}},
	},
	{
		name: "function_call and function_call_output",
		body: `{"model":"m","input":[
			{"role":"user","content":"weather in Paris and Rome?"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
			{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
			{"type":"function_call","call_id":"call_2","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},
			{"type":"function_call_output","call_id":"call_1","output":"18C"},
			{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"22"},{"type":"input_text","text":"C"}]}]}`,
		want: &llm.Request{Model: "m", IncludeUsage: true, Messages: []llm.Message{
			user(llm.TextPart("weather in Paris and Rome?")),
			turns(3, assistant(llm.TextPart("Checking."), toolCall("call_1", "get_weather", `{"city":"Paris"}`), toolCall("call_2", "get_weather", `{"city":"Rome"}`))),
			turns(2, user(toolResult("call_1", "", "18C"), toolResult("call_2", "", "22C"))),
		}},
	},
	{
		name: "reasoning item with encrypted_content replayed",
		body: `{"model":"m","include":["reasoning.encrypted_content"],"store":false,"input":[
			{"role":"user","content":"think"},
			{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"step one"},{"type":"summary_text","text":"step two"}],"encrypted_content":"gAAAA-opaque"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]},
			{"role":"user","content":"again"}]}`,
		want: &llm.Request{Model: "m", IncludeUsage: true, Messages: []llm.Message{
			user(llm.TextPart("think")),
			turns(2, assistant(llm.Part{Type: llm.PartReasoning, Text: "step one\nstep two", Signature: "gAAAA-opaque"}, llm.TextPart("done"))),
			user(llm.TextPart("again")),
		}},
	},
	{
		name: "flat function tools and tool_choice",
		body: responsesBody(`"tools":[{"type":"function","name":"get_weather","description":"Current weather","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false`),
		want: responsesReq(func(r *llm.Request) {
			r.Tools = []llm.Tool{{Name: "get_weather", Description: "Current weather", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true}}
			r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"}
			r.ParallelToolCalls = ptr(false)
		}),
	},
	{
		name: "tool_choice required",
		body: responsesBody(`"tool_choice":"required"`),
		want: responsesReq(func(r *llm.Request) { r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired} }),
	},
	{
		name: "text.format json_schema",
		body: responsesBody(`"text":{"format":{"type":"json_schema","name":"person","schema":{"type":"object","properties":{"name":{"type":"string"}}},"strict":true},"verbosity":"low"}`),
		want: responsesReq(func(r *llm.Request) {
			r.ResponseFormat = &llm.ResponseFormat{Name: "person", Strict: true, Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}
		}),
	},
	{
		name: "text.format json_object",
		body: responsesBody(`"text":{"format":{"type":"json_object"}}`),
		want: responsesReq(func(r *llm.Request) { r.ResponseFormat = &llm.ResponseFormat{} }),
	},
	{
		name: "text.format text",
		body: responsesBody(`"text":{"format":{"type":"text"}}`),
		want: responsesReq(nil),
	},
	{
		name: "reasoning effort and summary",
		body: responsesBody(`"reasoning":{"effort":"low","summary":"auto"}`),
		want: responsesReq(func(r *llm.Request) {
			r.Reasoning = &llm.Reasoning{Effort: "low", Enabled: true, IncludeThoughts: true}
		}),
	},
	{
		name: "reasoning summary only",
		body: responsesBody(`"reasoning":{"summary":"detailed"}`),
		want: responsesReq(func(r *llm.Request) { r.Reasoning = &llm.Reasoning{Enabled: true, IncludeThoughts: true} }),
	},
	{
		name: "reasoning effort without summary hides thoughts",
		body: responsesBody(`"reasoning":{"effort":"high"}`),
		want: responsesReq(func(r *llm.Request) { r.Reasoning = &llm.Reasoning{Effort: "high", Enabled: true} }),
	},
	{
		name: "sampling and control fields",
		body: responsesBody(`"max_output_tokens":256,"temperature":0.3,"top_p":0.8,"top_logprobs":2,"user":"u1","stream":true,"store":false,"metadata":{"k":"v"},"truncation":"disabled"`),
		want: responsesReq(func(r *llm.Request) {
			r.MaxTokens, r.Temperature, r.TopP, r.TopLogprobs, r.User, r.Stream = 256, ptr(0.3), ptr(0.8), ptr(2), "u1", true
		}),
	},
	{
		name: "previous_response_id null is fine",
		body: responsesBody(`"previous_response_id":null,"conversation":null`),
		want: responsesReq(nil),
	},
}

func TestDecodeResponses(t *testing.T) {
	for _, tc := range responsesDecodeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResponsesCodec{}.DecodeRequest(httptest.NewRequest(http.MethodPost, "/v1/responses", nil), []byte(tc.body))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("canonical request mismatch (-want +got):\n%s", d)
			}
		})
	}
}

var responsesErrorCases = []struct {
	name  string
	body  string
	param string
}{
	{"malformed JSON", `{"model":"m","input":`, ""},
	{"missing model", `{"input":"hi"}`, "model"},
	{"previous_response_id", responsesBody(`"previous_response_id":"resp_abc"`), "previous_response_id"},
	{"conversation", responsesBody(`"conversation":"conv_abc"`), "conversation"},
	{"missing input", `{"model":"m"}`, "input"},
	{"input a number", `{"model":"m","input":5}`, "input"},
	{"empty input", `{"model":"m","input":[]}`, "input"},
	{"no message item", `{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, "input"},
	{"unknown item type", `{"model":"m","input":[{"type":"quantum_call","id":"qc_1"}]}`, "input[0].type"},
	{"only a hosted tool's call", `{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, "input"},
	{"message without role", `{"model":"m","input":[{"type":"message","content":"hi"}]}`, "input[0].role"},
	{"message of unknown role", `{"model":"m","input":[{"role":"tool","content":"hi"}]}`, "input[0].role"},
	{"message content a number", `{"model":"m","input":[{"role":"user","content":5}]}`, "input[0].content"},
	{"unknown content part", `{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type"},
	{"user message with empty content", `{"model":"m","input":[{"role":"user","content":[]}]}`, "input[0].content"},
	{"assistant message with empty content", `{"model":"m","input":[{"role":"user","content":"x"},{"role":"assistant","content":[]}]}`, "input[1].content"},
	{"image in a developer message", `{"model":"m","input":[{"role":"developer","content":[{"type":"input_image","image_url":"https://x/y.png"}]},{"role":"user","content":"hi"}]}`, "input[0].content"},
	{"input_image file_id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "input[0].content[0].file_id"},
	{"input_image bad data URL", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,%%%"}]}]}`, "input[0].content[0].image_url"},
	{"input_file file_url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}`, "input[0].content[0].file_url"},
	{"input_file file_id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, "input[0].content[0].file_id"},
	{"function_call without call_id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0]"},
	{"function_call arguments not JSON", `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{"}]}`, "input[0].arguments"},
	{"function_call_output without call_id", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
	{"function_call_output without output", `{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output"},
	{"unknown tool type", responsesBody(`"tools":[{"type":"quantum"}]`), "tools[0].type"},
	{"namespace without name", responsesBody(`"tools":[{"type":"namespace","tools":[{"type":"function","name":"f"}]}]`), "tools[0].name"},
	{"namespace of hosted tools", responsesBody(`"tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]`), "tools[0].tools[0].type"},
	{"namespace member named like a function", responsesBody(`"tools":[{"type":"function","name":"n__f"},{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}]`), "tools[1].tools[0].name"},
	{"custom_tool_call without call_id", `{"model":"m","input":[{"type":"custom_tool_call","name":"apply_patch","input":"x"}]}`, "input[0]"},
	{"function tool without name", responsesBody(`"tools":[{"type":"function","parameters":{}}]`), "tools[0].name"},
	{"tool parameters not an object", responsesBody(`"tools":[{"type":"function","name":"f","parameters":true}]`), "tools[0].parameters"},
	{"tool_choice unknown", responsesBody(`"tool_choice":"always"`), "tool_choice"},
	{"text.format of unknown type", responsesBody(`"text":{"format":{"type":"yaml"}}`), "text.format.type"},
	{"text.format schema not an object", responsesBody(`"text":{"format":{"type":"json_schema","name":"x","schema":[]}}`), "text.format.schema"},
	{"max_output_tokens zero", responsesBody(`"max_output_tokens":0`), "max_output_tokens"},
	{"max_output_tokens below 16", responsesBody(`"max_output_tokens":15`), "max_output_tokens"}, // as OpenAI
	{"temperature a string", responsesBody(`"temperature":"warm"`), "temperature"},
	{"reasoning effort unknown", responsesBody(`"reasoning":{"effort":"extreme"}`), "reasoning.effort"},
	{"instructions not a string", responsesBody(`"instructions":["a"]`), "instructions"},
}

func TestDecodeResponses_Errors(t *testing.T) {
	for _, tc := range responsesErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeResponses(context.Background(), nil, nil, []byte(tc.body))
			if err == nil {
				t.Fatalf("decoded to %+v, want a 400 naming %q", req, tc.param)
			}
			badRequest(t, err, tc.param)
		})
	}
}

// turns marks m as holding n of the caller's messages (merged by decoding).
func turns(n int, m llm.Message) llm.Message {
	m.Turns = n
	return m
}
