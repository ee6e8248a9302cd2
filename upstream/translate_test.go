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
