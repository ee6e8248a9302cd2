package gemini_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// geminiUsage is the usage of most gemini replays: a 120-token prompt of
// which 96 were cached, 14 answer tokens and 31 thought tokens (which the
// canonical output includes).
var geminiUsage = llm.Usage{InputTokens: 120, CachedInputTokens: 96, OutputTokens: 14 + 31, ReasoningTokens: 31}

func TestGemini_Complete(t *testing.T) {
	t.Run("thought parts, signed text and cached tokens", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "complete.json")
		req := protocoltest.RichRequest(true)
		req.Reasoning = &llm.Reasoning{Effort: "high", Enabled: true, IncludeThoughts: true}
		resp, err := gemini.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), req)
		is.NoErr(err) // complete
		r := protocoltest.ReplyOf(resp)
		is.Equal(r.Reasoning, "Recalling European capitals.")
		is.Equal(len(r.Signatures), 1) // the text part's signature
		is.Equal(r.Text, "Paris is the capital of France.")
		is.Equal(r.Finish, llm.FinishStop)
		is.Equal(r.Usage, geminiUsage)
		protocoltest.NoLeak(t, "response", resp)
		protocoltest.GoldenRequest(t, f, "complete")
	})

	t.Run("parallel function calls finish with tool_calls", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "function_call.json")
		req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Weather in Paris and Rome?")}}},
			Tools: []llm.Tool{protocoltest.CityWeather, {Name: "get_time"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto, Allowed: []string{"get_weather"}}}
		resp, err := gemini.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), req)
		is.NoErr(err) // complete
		r := protocoltest.ReplyOf(resp)
		is.Equal(len(r.Calls), 2)
		is.Equal(r.Calls[0].Args, `{"city":"Paris"}`)
		is.True(r.Calls[0].Signature != "") // Gemini's signature rides on the call
		is.Equal(r.Calls[1].Signature, "")
		is.True(strings.HasPrefix(r.Calls[0].ID, "call_") && r.Calls[0].ID != r.Calls[1].ID) // ids synthesized
		is.Equal(r.Finish, llm.FinishToolCalls)                                              // STOP with calls
		protocoltest.NoLeak(t, "response", resp)
		protocoltest.GoldenRequest(t, f, "allowed_tools")
	})

	t.Run("blocked prompt", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "blocked.json")
		resp, err := gemini.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), &llm.Request{})
		is.NoErr(err) // complete
		is.Equal(resp.FinishReason, llm.FinishContentFilter)
		is.Equal(len(resp.Content), 0)
		is.Equal(resp.Usage.InputTokens, 12)
	})
}

func TestGemini_Stream(t *testing.T) {
	t.Run("function call in a separate chunk from finishReason", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "function_call.sse")
		req := &llm.Request{Stream: true, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("What is the weather in Paris?")}}},
			Tools: []llm.Tool{protocoltest.CityWeather}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired},
			Reasoning: &llm.Reasoning{BudgetTokens: 2048, Enabled: true, IncludeThoughts: true}}
		s, err := gemini.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), req)
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Reasoning, "Thinking about Paris weather.")
		is.Equal(len(r.Calls), 1)
		is.Equal(r.Calls[0].Name, "get_weather")
		is.Equal(r.Calls[0].Args, `{"city":"Paris"}`)
		is.True(r.Calls[0].Signature != "")
		is.Equal(r.Finish, llm.FinishToolCalls)
		is.Equal(r.Usage, geminiUsage) // the last snapshot
		protocoltest.NoLeak(t, "events", evs)
		protocoltest.GoldenRequest(t, f, "stream")
	})

	t.Run("thought parts then signed text", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "thoughts.sse")
		s, err := gemini.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Reasoning, "Recalling European capitals.")
		is.Equal(r.Text, "Paris is the capital of France.")
		is.Equal(len(r.Signatures), 1)
		is.Equal(r.Finish, llm.FinishStop)
		is.Equal(r.Usage, geminiUsage)
		is.Equal(*evs[0].Usage, llm.Usage{InputTokens: 120}) // the first chunk's promptTokenCount, on the first event
		for _, ev := range evs[1 : len(evs)-1] {
			is.True(ev.Usage == nil) // only the first and the finish carry usage
		}
	})

	t.Run("error as a bare JSON line after output", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "error.sse")
		s, err := gemini.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.Equal(len(evs), 1)
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindOverloaded)
		protocoltest.NoLeak(t, "error", le)
	})
}

// TestGemini_SignatureRoundTrip is trap 4 for thought signatures: the
// signature of a function call (and of signed text) goes back on the same
// part, and each functionResponse carries the name of its call.
func TestGemini_SignatureRoundTrip(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"stream", "function_call.sse"},
		{"complete", "function_call.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.Replay(t, c.file)
			b := gemini.New(protocoltest.Options(f, ""))
			first := &llm.Request{Stream: c.name == "stream", Tools: []llm.Tool{protocoltest.CityWeather},
				Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("What is the weather in Paris?")}}}}
			var assistant []llm.Part
			if first.Stream {
				s, err := b.Stream(protocoltest.Context(t), first)
				is.NoErr(err) // stream
				evs, err := protocoltest.Drain(s)
				is.NoErr(err) // drain
				assistant = protocoltest.PartsOfEvents(evs)
			} else {
				resp, err := b.Complete(protocoltest.Context(t), first)
				is.NoErr(err) // complete
				assistant = resp.Content
			}
			next := protocoltest.ToolLoop(assistant, protocoltest.CityWeather)
			next.Stream = first.Stream
			is.NoErr(protocoltest.RunCall(t, b, next)) // next turn
			var body struct {
				Contents []struct {
					Role  string
					Parts []struct {
						ThoughtSignature string
						FunctionCall     *struct{ ID, Name string }
						FunctionResponse *struct{ ID, Name string }
					}
				}
			}
			is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
			model, results := body.Contents[1], body.Contents[2]
			var calls int
			for _, p := range model.Parts {
				if p.FunctionCall != nil {
					calls++
				}
			}
			first0 := model.Parts[len(model.Parts)-calls]
			is.Equal(first0.ThoughtSignature, "CiQB0e2Ksig2") // Gemini's own signature, on the call
			is.Equal(len(results.Parts), calls)               // one response per call
			is.Equal(results.Parts[0].FunctionResponse.Name, "get_weather")
			is.Equal(results.Parts[0].FunctionResponse.ID, first0.FunctionCall.ID)
			protocoltest.GoldenRequest(t, f, "roundtrip_"+c.name)
		})
	}
}

func TestGemini_SignedTextRoundTrip(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"stream", "thoughts.sse"},
		{"complete", "complete.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.Replay(t, c.file)
			b := gemini.New(protocoltest.Options(f, ""))
			first := &llm.Request{Stream: c.name == "stream",
				Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France?")}}}}
			var assistant []llm.Part
			if first.Stream {
				s, err := b.Stream(protocoltest.Context(t), first)
				is.NoErr(err) // stream
				evs, err := protocoltest.Drain(s)
				is.NoErr(err) // drain
				assistant = protocoltest.PartsOfEvents(evs)
			} else {
				resp, err := b.Complete(protocoltest.Context(t), first)
				is.NoErr(err) // complete
				assistant = resp.Content
			}
			next := &llm.Request{Stream: first.Stream, Messages: append(first.Messages,
				llm.Message{Role: llm.RoleAssistant, Parts: assistant},
				llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("And of Italy?")}})}
			is.NoErr(protocoltest.RunCall(t, b, next)) // next turn
			// The signature that came on the text closes the thoughts before
			// it, streamed or not, and goes back on the last thought part.
			protocoltest.GoldenRequest(t, f, "signed_text_"+c.name)
		})
	}
}

func TestGemini_Request(t *testing.T) {
	t.Run("remote image URL is refused without a call", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "complete.json")
		_, err := gemini.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), protocoltest.RichRequest(false))
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindInvalidRequest)
		is.Equal(le.Message, "remote image URLs are not supported by this route")
		is.Equal(len(f.Requests()), 0)
		is.True(!upstream.Retryable(err))
	})

	cases := []struct {
		name, golden string
		req          *llm.Request
	}{
		{
			// Trap 5: structured output in the backend's native form.
			name:   "json schema as responseJsonSchema",
			golden: "json_schema",
			req: &llm.Request{
				Messages:       []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France as JSON.")}}},
				ResponseFormat: &llm.ResponseFormat{Name: "capital", Strict: true, Schema: json.RawMessage(`{"type":"object","properties":{"capital":{"type":"string"}},"required":["capital"]}`)},
				Reasoning:      &llm.Reasoning{Effort: "none"},
			},
		},
		{
			name:   "history from another backend: signatures dropped, placeholder on the call, names recovered",
			golden: "foreign_history",
			req: func() *llm.Request {
				r := protocoltest.ToolLoop([]llm.Part{
					{Type: llm.PartReasoning, Text: "Claude thought.", Signature: "sg1.EqQBclaude"},
					llm.TextPart("Checking."),
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_2", Name: "get_time"}},
				}, protocoltest.CityWeather, llm.Tool{Name: "get_time"})
				res := r.Messages[2].Parts
				res[1].ToolResult.Content = []llm.Part{llm.TextPart("noon"), {Type: llm.PartImage, MediaType: "image/png", Data: protocoltest.PNG}}
				res[1].ToolResult.IsError = true
				r.Messages[2].Parts = append([]llm.Part{llm.TextPart("Here you go.")}, res...)
				r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"}
				return r
			}(),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.Replay(t, "complete.json")
			_, err := gemini.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), c.req)
			is.NoErr(err) // complete
			protocoltest.GoldenRequest(t, f, c.golden)
		})
	}
}
