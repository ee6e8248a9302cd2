package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/llm"
)

func TestTranslate_Helpers(t *testing.T) {
	is := is.New(t)
	is.Equal(string(argsObject(nil)), `{}`)
	is.Equal(string(argsObject(json.RawMessage(` { "a" : 1 } `))), `{"a":1}`)
	is.Equal(string(argsObject(json.RawMessage(`[1]`))), `{"_raw":"[1]"}`)
	is.Equal(schemaName(""), "response")
	is.Equal(schemaName("capital answer!"), "capital_answer_")
	is.Equal(len(schemaName(strings.Repeat("x", 100))), 64)
	is.Equal(anthropicID("call.1:a/b"), "call_1_a_b")
	sig, ok := untagSig(sigThought, tagSig(sigThought, "abc"))
	is.True(ok)
	is.Equal(sig, "abc")
	_, ok = untagSig(sigThinking, tagSig(sigThought, "abc"))
	is.True(!ok) // another protocol's signature
	_, ok = untagSig(sigThinking, sigThinking)
	is.True(!ok) // a tag without a signature
	id := newCallID()
	is.True(strings.HasPrefix(id, "call_") && len(id) == 29)
}

func TestTranslate_Effort(t *testing.T) {
	cases := []struct {
		r               *llm.Reasoning
		openai, gBudget string
	}{
		{nil, "", ""},
		{&llm.Reasoning{Effort: "none"}, "none", "0"},
		{&llm.Reasoning{BudgetTokens: 0}, "", "0"},
		{&llm.Reasoning{Effort: "HIGH", Enabled: true}, "high", "24576"},
		{&llm.Reasoning{Effort: "max", Enabled: true}, "xhigh", "32768"},
		{&llm.Reasoning{BudgetTokens: 1500, Enabled: true}, "low", "1500"},
		{&llm.Reasoning{BudgetTokens: 30000, Enabled: true}, "high", "30000"},
		{&llm.Reasoning{Enabled: true, IncludeThoughts: true}, "", ""},
	}
	for _, c := range cases {
		is := is.New(t)
		is.Equal(openAIEffort(c.r), c.openai)
		b, err := (&Gemini{}).body(&llm.Request{Reasoning: c.r})
		is.NoErr(err) // gemini body
		var g struct {
			GenerationConfig *struct {
				ThinkingConfig *struct{ ThinkingBudget *int }
			}
		}
		is.NoErr(json.Unmarshal(b, &g))
		got := ""
		if gc := g.GenerationConfig; gc != nil && gc.ThinkingConfig != nil && gc.ThinkingConfig.ThinkingBudget != nil {
			got = strings.TrimSpace(string(mustJSON(*gc.ThinkingConfig.ThinkingBudget)))
		}
		is.Equal(got, c.gBudget)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestTranslate_AnthropicThinkingBudget(t *testing.T) {
	is := is.New(t)
	th, _ := anthropicThinking(&llm.Reasoning{BudgetTokens: 8000, Enabled: true}, 4096, false, nil)
	is.Equal(th.BudgetTokens, 4095) // below max_tokens
	th, _ = anthropicThinking(&llm.Reasoning{BudgetTokens: 8000, Enabled: true}, 1000, false, nil)
	is.True(th == nil) // no room for the API's minimum budget
	th, effort := anthropicThinking(&llm.Reasoning{Effort: "minimal", Enabled: true}, 1000, false, nil)
	is.Equal(th.Type, "adaptive")
	is.Equal(effort, "low")
	th, _ = anthropicThinking(&llm.Reasoning{Effort: "high", Enabled: true}, 1000, true, nil)
	is.True(th == nil) // a forced tool choice
}

func TestTranslate_OpenAIQuirks(t *testing.T) {
	is := is.New(t)
	s := &openAIStream{}
	out, _, err := s.decode(sseEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"},{"type":"thinking","text":"x"},{"type":"text","text":"b"}]}}]}`)}, nil)
	is.NoErr(err) // array content
	is.Equal(len(out), 1)
	is.Equal(out[0].Text, "ab")
	out, _, err = s.decode(sseEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"content":"say \"h\u00e9\"\n"}}]}`)}, nil)
	is.NoErr(err) // escaped content
	is.Equal(out[0].Text, "say \"hé\"\n")
	_, _, err = s.decode(sseEvent{Data: []byte(`{"error":"model not loaded"}`)}, nil)
	is.Equal(err.(*llm.Error).Kind, llm.KindUpstream) // a bare string error
	out, _, err = s.decode(sseEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x1","function":{"name":"f","arguments":{"a":1}}}]}}]}`)}, nil)
	is.NoErr(err) // arguments as an object
	is.Equal(out[1].Text, `{"a":1}`)
	out, _, _ = s.decode(sseEvent{Data: []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x2","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"stop"}]}`)}, nil)
	is.Equal(out[0].Type, llm.EventToolCallStart) // a new id at the same index is a new call
	is.Equal(out[0].Index, 1)
	out, err = s.finish(nil, true)
	is.NoErr(err)                                      // finish
	is.Equal(out[0].FinishReason, llm.FinishToolCalls) // "stop" after tool calls
}

// A conversation with system guidance inside it (a messages caller's
// mid-conversation system messages, as Claude Code sends them): after the
// first user turn, and between a tool call and its result's turn.
func guidedRequest() *llm.Request {
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

func TestTranslate_SystemGuidance(t *testing.T) {
	t.Run("chat-completions: a system message at its place, after tool messages", func(t *testing.T) {
		is := is.New(t)
		b, err := (&OpenAI{}).body(guidedRequest(), false)
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
	})
	t.Run("messages: marked guidance inside the user turns", func(t *testing.T) {
		is := is.New(t)
		b, err := (&Anthropic{}).body(guidedRequest(), false)
		is.NoErr(err)
		var r struct {
			Messages []struct {
				Role    string
				Content []struct{ Type, Text string }
			}
		}
		is.NoErr(json.Unmarshal(b, &r))
		is.Equal(len(r.Messages), 3) // user, assistant, user: the turns alternate
		is.Equal(r.Messages[0].Content[1].Text, "<system-reminder>\nWorking directory: /tmp\n</system-reminder>")
		last := r.Messages[2].Content
		is.Equal(last[0].Type, "tool_result") // results open the turn
		is.Equal(last[1].Text, "<system-reminder>\nPlan mode is off.\n</system-reminder>")
		is.Equal(last[2].Text, "<system-reminder>\nToday is Monday.\n</system-reminder>")
	})
	t.Run("generate-content: marked guidance inside the user turns", func(t *testing.T) {
		is := is.New(t)
		b, err := (&Gemini{}).body(guidedRequest())
		is.NoErr(err)
		var r struct {
			Contents []struct {
				Role  string
				Parts []struct {
					Text             string
					FunctionResponse json.RawMessage
				}
			}
		}
		is.NoErr(json.Unmarshal(b, &r))
		is.Equal(len(r.Contents), 3)
		is.Equal(r.Contents[0].Parts[1].Text, "<system-reminder>\nWorking directory: /tmp\n</system-reminder>")
		is.True(r.Contents[2].Parts[0].FunctionResponse != nil) // the response opens the turn
		is.Equal(r.Contents[2].Parts[2].Text, "<system-reminder>\nToday is Monday.\n</system-reminder>")
	})
}
