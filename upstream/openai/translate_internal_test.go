package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestTranslate_SchemaName(t *testing.T) {
	is := is.New(t)
	is.Equal(schemaName(""), "response")
	is.Equal(schemaName("capital answer!"), "capital_answer_")
	is.Equal(len(schemaName(strings.Repeat("x", 100))), 64)
}

func TestTranslate_Effort(t *testing.T) {
	cases := []struct {
		r    *llm.Reasoning
		want string
	}{
		{nil, ""},
		{&llm.Reasoning{Effort: "none"}, "none"},
		{&llm.Reasoning{BudgetTokens: 0}, ""},
		{&llm.Reasoning{Effort: "HIGH", Enabled: true}, "high"},
		{&llm.Reasoning{Effort: "max", Enabled: true}, "xhigh"},
		{&llm.Reasoning{BudgetTokens: 1500, Enabled: true}, "low"},
		{&llm.Reasoning{BudgetTokens: 30000, Enabled: true}, "high"},
		{&llm.Reasoning{Enabled: true, IncludeThoughts: true}, ""},
	}
	for _, c := range cases {
		is := is.New(t)
		is.Equal(openAIEffort(c.r), c.want)
	}
}

func TestTranslate_OpenAIQuirks(t *testing.T) {
	is := is.New(t)
	s := &openAIStream{}
	out, _, err := s.Decode(protocol.SSEEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"},{"type":"thinking","text":"x"},{"type":"text","text":"b"}]}}]}`)}, nil)
	is.NoErr(err) // array content
	is.Equal(len(out), 1)
	is.Equal(out[0].Text, "ab")
	out, _, err = s.Decode(protocol.SSEEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"content":"say \"h\u00e9\"\n"}}]}`)}, nil)
	is.NoErr(err) // escaped content
	is.Equal(out[0].Text, "say \"hé\"\n")
	_, _, err = s.Decode(protocol.SSEEvent{Data: []byte(`{"error":"model not loaded"}`)}, nil)
	is.Equal(err.(*llm.Error).Kind, llm.KindUpstream) // a bare string error
	out, _, err = s.Decode(protocol.SSEEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x1","function":{"name":"f","arguments":{"a":1}}}]}}]}`)}, nil)
	is.NoErr(err) // arguments as an object
	is.Equal(out[1].Text, `{"a":1}`)
	out, _, _ = s.Decode(protocol.SSEEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x2","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"stop"}]}`)}, nil)
	is.Equal(out[0].Type, llm.EventToolCallStart) // a new id at the same index is a new call
	is.Equal(out[0].Index, 1)
	out, err = s.Finish(nil, true)
	is.NoErr(err)                                      // finish
	is.Equal(out[0].FinishReason, llm.FinishToolCalls) // "stop" after tool calls
}

func TestTranslate_SystemGuidance(t *testing.T) {
	// chat-completions: a system message at its place, after tool messages.
	is := is.New(t)
	b, err := (&Backend{}).body(protocoltest.GuidedRequest(), false)
	is.NoErr(err)
	var r struct {
		Messages []struct {
			Role, ToolCallID string
			Content          json.RawMessage
		} `json:"messages"`
	}
	is.NoErr(json.Unmarshal(b, &r))
	var roles []string
	for _, m := range r.Messages {
		roles = append(roles, m.Role)
	}
	// The tool message follows its call directly; the guidance given
	// between them comes after it.
	is.Equal(strings.Join(roles, ","), "system,user,system,assistant,tool,system,system")
	is.Equal(string(r.Messages[2].Content), `"Working directory: /tmp"`)
	is.Equal(string(r.Messages[5].Content), `"Plan mode is off."`)
	is.Equal(string(r.Messages[6].Content), `"Today is Monday."`)
}

func TestStopRule(t *testing.T) {
	protocoltest.CheckStopRule(t, openAIStops, []protocoltest.StopRuleCase{
		{Name: "four go up", Stops: []string{"a", "b", "c", "d"}, Sent: []string{"a", "b", "c", "d"}},
		{Name: "a fifth is the gateway's", Stops: []string{"a", "b", "c", "d", "e"}, Sent: []string{"a", "b", "c", "d"}, Gateway: []string{"a", "b", "c", "d", "e"}},
		{Name: "none"},
	})
}

// TestBody_ContentBytes: message content goes upstream exactly as it did
// when each was encoded apart (protocol.EncodeJSON) and embedded: <, > and &
// as written, U+2028 escaped, invalid UTF-8 as \ufffd; one text part as a
// string, parts as an array, tool results as their text.
func TestBody_ContentBytes(t *testing.T) {
	is := is.New(t)
	texts := []string{"a <b> & c", "line\u2028sep\u2029", "bad \xff\xfe utf-8", "quote \" back \\ tab \t nul \x00", "emoji 😀 é"}
	for _, text := range texts {
		req := &llm.Request{Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(text)}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.TextPart(text + "!"), {Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{}`)}}}},
			{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "c1", Content: []llm.Part{llm.TextPart(text)}}}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("x" + text), llm.TextPart(text + "y")}},
		}}
		b, err := (&Backend{}).body(req, false)
		is.NoErr(err)
		var r struct {
			Messages []struct {
				Content json.RawMessage
			} `json:"messages"`
		}
		is.NoErr(json.Unmarshal(b, &r))
		enc := func(v any) string {
			out, err := protocol.EncodeJSON(v)
			is.NoErr(err)
			return string(out)
		}
		want := []string{enc(text), enc(text + "!"), enc(text),
			enc([]oaPart{{Type: "text", Text: "x" + text}, {Type: "text", Text: text + "y"}})}
		is.Equal(len(r.Messages), len(want))
		for i, w := range want {
			is.Equal(string(r.Messages[i].Content), w) // message i
		}
	}
}
