package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// cacheUsage is the usage of the anthropic replays: 22 fresh input tokens,
// 1800 read from the cache, 500 written (200 for five minutes, 300 for an
// hour), 64 output tokens.
var cacheUsage = llm.Usage{
	InputTokens:           22 + 1800 + 500,
	CachedInputTokens:     1800,
	CacheCreationTokens:   500,
	CacheCreation1hTokens: 300,
	OutputTokens:          64,
}

func TestAnthropic_Complete(t *testing.T) {
	t.Run("thinking, text and tool use with cache reads and both cache writes", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "complete.json")
		req := protocoltest.RichRequest(false)
		req.Tools = []llm.Tool{
			{Name: "get_time", CacheControl: &llm.CacheControl{TTL: "1h"}},
			protocoltest.CityWeather,
		}
		req.Reasoning = &llm.Reasoning{BudgetTokens: 50000, Enabled: true, IncludeThoughts: true}
		resp, err := anthropic.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), req)
		is.NoErr(err) // complete
		r := protocoltest.ReplyOf(resp)
		is.Equal(r.Reasoning, "User wants weather.")
		is.Equal(len(r.Signatures), 1)
		is.Equal(r.Text, "Let me check.")
		is.Equal(len(r.Calls), 1)
		is.Equal(r.Calls[0].Args, `{"city":"Paris"}`)
		is.True(strings.HasPrefix(r.Calls[0].ID, "call_"))
		is.Equal(r.Finish, llm.FinishToolCalls)
		is.Equal(r.Usage, cacheUsage) // trap 2: cache tokens counted once, 5m and 1h apart
		protocoltest.NoLeak(t, "response", resp)
		protocoltest.GoldenRequest(t, f, "complete")
	})
}

func TestAnthropic_Stream(t *testing.T) {
	t.Run("thinking with signature then text then tool use, cache usage taken once", func(t *testing.T) {
		// Trap 3 (text and tool-call arguments after a thinking block) and
		// trap 2 (message_start and message_delta both report the input
		// and cache counts; they must not add up).
		is := is.New(t)
		f := protocoltest.Replay(t, "thinking_tool.sse")
		req := protocoltest.ToolLoop(nil, protocoltest.CityWeather)
		req.Messages = req.Messages[:1]
		req.Stream = true
		req.Reasoning = &llm.Reasoning{Effort: "high", Enabled: true}
		s, err := anthropic.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), req)
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Reasoning, "User wants weather.")
		is.Equal(len(r.Signatures), 1)
		is.Equal(r.Text, "Let me check.")
		is.Equal(len(r.Calls), 1)
		is.Equal(r.Calls[0].Name, "get_weather")
		is.Equal(r.Calls[0].Args, `{"city": "Paris"}`)
		is.Equal(r.Finish, llm.FinishToolCalls)
		is.Equal(r.Usage, cacheUsage)
		// message_start's input and cache counts ride on the first event,
		// for the messages surface's own message_start.
		is.Equal(*evs[0].Usage, llm.Usage{InputTokens: cacheUsage.InputTokens, CachedInputTokens: cacheUsage.CachedInputTokens,
			CacheCreationTokens: cacheUsage.CacheCreationTokens, CacheCreation1hTokens: cacheUsage.CacheCreation1hTokens})
		for _, ev := range evs[1 : len(evs)-1] {
			is.True(ev.Usage == nil) // only the first and the finish carry usage
		}
		protocoltest.NoLeak(t, "events", evs)
		protocoltest.GoldenRequest(t, f, "stream")
	})

	t.Run("error event after output", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "error.sse")
		s, err := anthropic.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		is.NoErr(err) // the first event came before the error
		evs, err := protocoltest.Drain(s)
		is.Equal(len(evs), 1)
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindOverloaded)
		is.True(!upstream.Retryable(err))
		protocoltest.NoLeak(t, "error", le)
	})

	t.Run("error event before output", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "error_first.sse")
		_, err := anthropic.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindOverloaded)
		is.True(upstream.Retryable(err))
		protocoltest.NoLeak(t, "error", le)
	})

	t.Run("stream cut before message_stop", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "cut.sse")
		s, err := anthropic.New(protocoltest.Options(f, "")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		is.NoErr(err) // stream
		_, err = protocoltest.Drain(s)
		is.Equal(protocoltest.LLMError(t, err).Kind, llm.KindUpstream)
	})
}

// TestAnthropic_SignatureRoundTrip is trap 4: a reply with thinking, its
// signature and a tool call becomes the history of the next request, which
// must replay the thinking block, signature intact, at the start of the
// assistant turn, whether the reply was streamed or not.
func TestAnthropic_SignatureRoundTrip(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"complete", "complete.json"},
		{"stream", "thinking_tool.sse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.Replay(t, c.file)
			b := anthropic.New(protocoltest.Options(f, ""))
			first := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("What is the weather in Paris?")}}},
				Tools: []llm.Tool{protocoltest.CityWeather}, Reasoning: &llm.Reasoning{BudgetTokens: 2048, Enabled: true}}
			var assistant []llm.Part
			if c.name == "stream" {
				first.Stream = true
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
			next.Reasoning, next.Stream = first.Reasoning, first.Stream
			is.NoErr(protocoltest.RunCall(t, b, next)) // next turn
			var body struct {
				Thinking *struct{ Type string } `json:"thinking"`
				Messages []struct {
					Role    string
					Content []struct {
						Type, Signature, Thinking, ID string
						ToolUseID                     string `json:"tool_use_id"`
					}
				}
			}
			is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
			is.True(body.Thinking != nil) // thinking stays on: the history replays it
			turn := body.Messages[1].Content
			is.Equal(turn[0].Type, "thinking")
			is.Equal(turn[0].Signature, "EqQBCkgIARgCKkBsigOne==") // the vendor's own signature, untagged
			is.Equal(turn[0].Thinking, "User wants weather.")
			is.Equal(turn[2].Type, "tool_use")
			is.Equal(body.Messages[2].Content[0].ToolUseID, turn[2].ID)
			protocoltest.GoldenRequest(t, f, "roundtrip_"+c.name)
		})
	}

	t.Run("redacted thinking from a stream", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "redacted.sse")
		b := anthropic.New(protocoltest.Options(f, ""))
		s, err := b.Stream(protocoltest.Context(t), &llm.Request{Stream: true, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Time?")}}}})
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Calls[0].Args, "{}") // a call without input still has arguments
		is.Equal(r.Usage, llm.Usage{InputTokens: 30, OutputTokens: 40})
		next := protocoltest.ToolLoop(protocoltest.PartsOfEvents(evs), llm.Tool{Name: "get_time"})
		next.Reasoning, next.Stream = &llm.Reasoning{Effort: "medium", Enabled: true}, true
		is.NoErr(protocoltest.RunCall(t, b, next)) // next turn
		protocoltest.GoldenRequest(t, f, "roundtrip_redacted")
	})
}

func TestAnthropic_Request(t *testing.T) {
	forced := func() *llm.Request {
		r := protocoltest.ToolLoop(nil, protocoltest.CityWeather)
		r.Messages = r.Messages[:1]
		r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"}
		r.Reasoning = &llm.Reasoning{Effort: "high", Enabled: true}
		return r
	}
	cases := []struct {
		name, golden string
		req          *llm.Request
	}{
		{
			// Trap 5: structured output in the backend's native form.
			name:   "json schema as output_config.format",
			golden: "json_schema",
			req: &llm.Request{
				Messages:       []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France as JSON.")}}},
				ResponseFormat: &llm.ResponseFormat{Name: "capital", Schema: json.RawMessage(`{"type":"object","properties":{"capital":{"type":"string"}},"required":["capital"],"additionalProperties":false}`), Strict: true},
				Reasoning:      &llm.Reasoning{Effort: "low", Enabled: true},
			},
		},
		{
			name:   "json object as a system instruction",
			golden: "json_object",
			req: &llm.Request{
				Messages:       []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France as JSON.")}}},
				ResponseFormat: &llm.ResponseFormat{},
				MaxTokens:      300,
			},
		},
		{
			name:   "forced tool choice turns thinking off",
			golden: "forced_tool",
			req:    forced(),
		},
		{
			name:   "history from another backend: foreign signatures dropped, thinking off, tools declared",
			golden: "foreign_history",
			req: func() *llm.Request {
				r := protocoltest.ToolLoop([]llm.Part{
					{Type: llm.PartReasoning, Text: "Gemini thought.", Signature: "sg3.CiQBgemini"},
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call.with:odd/chars", Name: "get_weather", Arguments: json.RawMessage(`not json`), Signature: "sg3.CiQBcall"}},
				})
				r.Reasoning = &llm.Reasoning{BudgetTokens: 4000, Enabled: true}
				r.Temperature = new(0.2)
				return r
			}(),
		},
		{
			name:   "more than four cache breakpoints keep the last four",
			golden: "breakpoints",
			req: func() *llm.Request {
				cc := &llm.CacheControl{}
				r := &llm.Request{
					System:       []llm.Part{{Type: llm.PartText, Text: "a", CacheControl: cc}, {Type: llm.PartText, Text: "b", CacheControl: cc}},
					Messages:     []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "c", CacheControl: cc}, {Type: llm.PartText, Text: "d", CacheControl: cc}, llm.TextPart("")}}},
					CacheControl: &llm.CacheControl{TTL: "1h"},
				}
				return r
			}(),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.Replay(t, "text.json")
			_, err := anthropic.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), c.req)
			is.NoErr(err) // complete
			protocoltest.GoldenRequest(t, f, c.golden)
		})
	}
}
