package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
	"github.com/svcgw/svcgw/upstream/openai"
)

func TestOpenAI_Complete(t *testing.T) {
	t.Run("text with images, a PDF and cached tokens", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "text.json")
		resp, err := openai.New(protocoltest.Options(f, "/v1")).Complete(protocoltest.Context(t), protocoltest.RichRequest(false))
		is.NoErr(err) // complete
		r := protocoltest.ReplyOf(resp)
		is.Equal(r.Text, "Paris is the capital of France.")
		is.Equal(r.Finish, llm.FinishStop)
		is.Equal(r.Usage, llm.Usage{InputTokens: 1200, CachedInputTokens: 1024, OutputTokens: 40, ReasoningTokens: 12})
		is.Equal(resp.ID, "")    // the server issues ids
		is.Equal(resp.Model, "") // and echoes the caller's model
		protocoltest.NoLeak(t, "response", resp)
		protocoltest.GoldenRequest(t, f, "text")
	})

	t.Run("parallel tool calls after reasoning", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "tool_call.json")
		no := false
		req := &llm.Request{
			Messages:          []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Weather in Paris and Rome?")}}},
			Tools:             []llm.Tool{protocoltest.CityWeather, {Name: "get_time"}},
			ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceRequired, Allowed: []string{"get_weather"}},
			ParallelToolCalls: &no,
			Reasoning:         &llm.Reasoning{Effort: "max", Enabled: true},
		}
		resp, err := openai.New(protocoltest.Options(f, "/v1")).Complete(protocoltest.Context(t), req)
		is.NoErr(err) // complete
		r := protocoltest.ReplyOf(resp)
		is.Equal(r.Reasoning, "The user wants the weather in two cities.")
		is.Equal(len(r.Calls), 2)
		is.Equal(r.Calls[0].Name, "get_weather")
		is.Equal(r.Calls[0].Args, `{"city":"Paris"}`)
		is.Equal(r.Calls[1].Args, `{"city":"Rome"}`)
		is.True(strings.HasPrefix(r.Calls[0].ID, "call_") && r.Calls[0].ID != r.Calls[1].ID) // gateway ids
		is.Equal(r.Finish, llm.FinishToolCalls)
		is.Equal(r.Usage, llm.Usage{InputTokens: 81, OutputTokens: 18, ReasoningTokens: 9})
		protocoltest.NoLeak(t, "response", resp)
		protocoltest.GoldenRequest(t, f, "tool_choice")
	})
}

func TestOpenAI_Stream(t *testing.T) {
	t.Run("usage-only trailer after the finish chunk", func(t *testing.T) {
		// Trap 1: a stream billed as zero because usage was not asked for,
		// or because the stream was cut at finish_reason.
		is := is.New(t)
		f := protocoltest.Replay(t, "text.sse")
		req := protocoltest.RichRequest(false)
		req.Stream, req.IncludeUsage = true, false // the caller did not ask for usage
		s, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), req)
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Text, "Paris is the capital of France.")
		is.Equal(r.Finish, llm.FinishStop)
		is.Equal(r.Usage, llm.Usage{InputTokens: 1200, CachedInputTokens: 1024, OutputTokens: 40, ReasoningTokens: 12})
		var body struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
		is.True(body.StreamOptions.IncludeUsage) // usage is always asked for upstream
		protocoltest.NoLeak(t, "events", evs)
		protocoltest.GoldenRequest(t, f, "stream")
	})

	t.Run("reasoning then tool calls split across frames", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "tools.sse")
		req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Weather?")}}},
			Tools: []llm.Tool{protocoltest.CityWeather}, Stream: true}
		s, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), req)
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Reasoning, "Two cities, two calls.")
		is.Equal(r.Text, "Checking.")
		is.Equal(len(r.Calls), 2)
		is.Equal(r.Calls[0], protocoltest.ToolCall{ID: r.Calls[0].ID, Name: "get_weather", Args: `{"city":"Paris"}`})
		is.Equal(r.Calls[1], protocoltest.ToolCall{ID: r.Calls[1].ID, Name: "get_weather", Args: `{"city":"Rome"}`})
		is.True(r.Calls[0].ID != r.Calls[1].ID)
		is.Equal(r.Finish, llm.FinishToolCalls)
		is.Equal(r.Usage, llm.Usage{InputTokens: 81, CachedInputTokens: 64, OutputTokens: 18, ReasoningTokens: 9})
		protocoltest.NoLeak(t, "events", evs)
	})

	t.Run("reasoning field, comments, usage on the finish chunk and no [DONE]", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "reasoning.sse")
		s, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), &llm.Request{Stream: true,
			Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France?")}}}})
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Reasoning, "Recall the capital.")
		is.Equal(r.Text, "Paris.")
		is.Equal(r.Finish, llm.FinishLength)
		is.Equal(r.Usage, llm.Usage{InputTokens: 20, OutputTokens: 30, ReasoningTokens: 25})
		protocoltest.NoLeak(t, "events", evs)
	})

	t.Run("server that ignores include_usage is billed an estimate", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "no_usage.sse")
		req := &llm.Request{Stream: true, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France?")}}}}
		s, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), req)
		is.NoErr(err) // stream
		evs, err := protocoltest.Drain(s)
		is.NoErr(err) // drain
		r := protocoltest.ReplyOfEvents(t, evs)
		is.Equal(r.Text, "Paris is the capital of France.")
		is.Equal(r.Usage.InputTokens, req.InputTokens())
		is.Equal(r.Usage.OutputTokens, llm.TextTokens(r.Text))
	})

	t.Run("error frame after output", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "error.sse")
		s, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		is.NoErr(err) // the first event came before the error
		evs, err := protocoltest.Drain(s)
		is.Equal(len(evs), 1)
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindOverloaded)
		is.True(!upstream.Retryable(err)) // output has been produced
		protocoltest.NoLeak(t, "error", le)
	})

	t.Run("error frame before output", func(t *testing.T) {
		is := is.New(t)
		f := protocoltest.Replay(t, "error_first.sse")
		_, err := openai.New(protocoltest.Options(f, "/v1")).Stream(protocoltest.Context(t), &llm.Request{Stream: true})
		le := protocoltest.LLMError(t, err)
		is.Equal(le.Kind, llm.KindRateLimited)
		is.True(upstream.Retryable(err)) // nothing was produced
		protocoltest.NoLeak(t, "error", le)
	})
}

func TestOpenAI_Request(t *testing.T) {
	cases := []struct {
		name, golden string
		req          *llm.Request
		opts         func(*upstream.HTTPOptions)
	}{
		{
			name:   "tool loop history with reasoning, images in results and text after them",
			golden: "tool_loop",
			req: func() *llm.Request {
				r := protocoltest.ToolLoop([]llm.Part{
					{Type: llm.PartReasoning, Text: "Need the weather.", Signature: "sg1.opaque"},
					llm.TextPart("Checking."),
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
					{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_2", Name: "get_weather"}},
				}, protocoltest.CityWeather)
				last := &r.Messages[len(r.Messages)-1]
				last.Parts[1].ToolResult.Content = append(last.Parts[1].ToolResult.Content, llm.Part{Type: llm.PartImage, MediaType: "image/png", Data: protocoltest.PNG})
				last.Parts = append(last.Parts, llm.TextPart("And in Rome?"))
				r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"}
				return r
			}(),
		},
		{
			// Trap 5: structured output in the backend's native form.
			name:   "json schema without a name",
			golden: "json_schema",
			req: &llm.Request{
				Messages:       []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France as JSON.")}}},
				ResponseFormat: &llm.ResponseFormat{Schema: json.RawMessage(`{"type":"object","properties":{"capital":{"type":"string"}},"required":["capital"],"additionalProperties":false}`), Strict: true},
				CacheControl:   &llm.CacheControl{},
			},
		},
		{
			name:   "json object, reasoning budget and legacy max_tokens",
			golden: "json_object",
			req: &llm.Request{
				Messages:       []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Capital of France as JSON.")}}},
				ResponseFormat: &llm.ResponseFormat{Name: "capital answer!"},
				Reasoning:      &llm.Reasoning{BudgetTokens: 10000, Enabled: true},
				MaxTokens:      500,
			},
			opts: func(o *upstream.HTTPOptions) {
				o.LegacyMaxTokens = true
				o.Headers = map[string]string{"X-Title": "svcgw"}
				o.APIKey = ""
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := protocoltest.Replay(t, "text.json")
			o := protocoltest.Options(f, "/v1")
			if c.opts != nil {
				c.opts(&o)
			}
			_, err := openai.New(o).Complete(protocoltest.Context(t), c.req)
			is.NoErr(err) // complete
			protocoltest.GoldenRequest(t, f, c.golden)
		})
	}
}
