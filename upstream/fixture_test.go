package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

func user(text string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(text)}}
}

func chatRequest(texts ...string) *llm.Request {
	r := &llm.Request{Model: "svc-fusion"}
	for _, t := range texts {
		r.Messages = append(r.Messages, user(t))
	}
	return r
}

// collect drains a stream, failing the test on a stream error.
func collect(t *testing.T, s upstream.Stream) []llm.Event {
	t.Helper()
	defer s.Close()
	var evs []llm.Event
	for s.Next() {
		evs = append(evs, s.Event())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return evs
}

// streamed is what a stream adds up to.
type streamed struct {
	reasoning, signature, text, args, callID, callName string
	finish                                             llm.FinishReason
	stopSequence                                       string
	usage                                              llm.Usage
	textEvents, argEvents                              int
}

func fold(t *testing.T, evs []llm.Event) streamed {
	t.Helper()
	var out streamed
	for i, ev := range evs {
		switch ev.Type {
		case llm.EventReasoningDelta:
			out.reasoning += ev.Text
			out.signature += ev.Signature
		case llm.EventTextDelta:
			out.text += ev.Text
			out.textEvents++
		case llm.EventToolCallStart:
			out.callID, out.callName = ev.ToolCall.ID, ev.ToolCall.Name
		case llm.EventToolCallDelta:
			out.args += ev.Text
			out.argEvents++
		case llm.EventFinish:
			if i != len(evs)-1 {
				t.Fatalf("finish event at %d of %d", i, len(evs))
			}
			out.finish, out.stopSequence, out.usage = ev.FinishReason, ev.StopSequence, *ev.Usage
		}
	}
	return out
}

// fromResponse is what a complete response adds up to, in the same shape.
func fromResponse(r *llm.Response) streamed {
	out := streamed{finish: r.FinishReason, stopSequence: r.StopSequence, usage: r.Usage, text: r.Text()}
	for _, p := range r.Content {
		switch p.Type {
		case llm.PartReasoning:
			out.reasoning += p.Text
			out.signature += p.Signature
		case llm.PartToolCall:
			out.args, out.callID, out.callName = string(p.ToolCall.Arguments), p.ToolCall.ID, p.ToolCall.Name
		}
	}
	return out
}

func TestFixture_Complete_echo(t *testing.T) {
	is := is.New(t)
	f := upstream.NewFixture(upstream.FixtureOptions{})
	req := chatRequest("first question", "What is  the\ncapital of France?")
	resp, err := f.Complete(context.Background(), req)
	is.NoErr(err)
	is.Equal(resp.Text(), `Fixture reply to: "What is the capital of France?". This reply is deterministic: the same request always gets the same answer.`)
	is.Equal(resp.FinishReason, llm.FinishStop)
	is.Equal(resp.ID, "")    // the server issues ids
	is.Equal(resp.Model, "") // and echoes the model
	is.Equal(resp.Usage.InputTokens, req.InputTokens())
	is.Equal(resp.Usage.OutputTokens, llm.TextTokens(resp.Text()))
	is.Equal(resp.Usage.ReasoningTokens, 0)
}

func TestFixture_Complete_quotesAtMost200Characters(t *testing.T) {
	is := is.New(t)
	f := upstream.NewFixture(upstream.FixtureOptions{})
	long := strings.Repeat("é", 250)
	resp, err := f.Complete(context.Background(), chatRequest(long))
	is.NoErr(err)
	is.True(strings.Contains(resp.Text(), `"`+strings.Repeat("é", 200)+`"`)) // 200 characters, not bytes
}

func TestFixture_deterministic(t *testing.T) {
	reqs := map[string]*llm.Request{
		"echo":      chatRequest("hello there"),
		"tool call": withTools(chatRequest("weather?"), weatherTool),
		"json":      withFormat(chatRequest("extract"), `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		"reasoning": withReasoning(chatRequest("think hard")),
	}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			a, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
			is.NoErr(err)
			b, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
			is.NoErr(err)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			is.Equal(string(ja), string(jb)) // byte for byte
			c, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), withModel(req, "other"))
			is.NoErr(err)
			is.Equal(c.Text(), a.Text()) // content does not depend on the model id
		})
	}
}

const weatherTool = `{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`

func withTools(r *llm.Request, schemas ...string) *llm.Request {
	c := *r
	c.Tools = nil
	for i, s := range schemas {
		c.Tools = append(c.Tools, llm.Tool{Name: []string{"get_weather", "search", "lookup"}[i], Parameters: json.RawMessage(s)})
	}
	return &c
}

func withFormat(r *llm.Request, schema string) *llm.Request {
	c := *r
	c.ResponseFormat = &llm.ResponseFormat{Name: "out"}
	if schema != "" {
		c.ResponseFormat.Schema = json.RawMessage(schema)
	}
	return &c
}

func withReasoning(r *llm.Request) *llm.Request {
	c := *r
	c.Reasoning = &llm.Reasoning{Enabled: true, Effort: "high"}
	return &c
}

func withModel(r *llm.Request, model string) *llm.Request {
	c := *r
	c.Model = model
	return &c
}

func TestFixture_toolChoice(t *testing.T) {
	three := withTools(chatRequest("which tool?"), weatherTool, `{}`, `{}`)
	tests := []struct {
		name     string
		choice   llm.ToolChoice
		wantName string
		wantErr  bool
		wantText bool
		prompt   string
	}{
		{"unspecified calls the first tool", llm.ToolChoice{}, "get_weather", false, false, ""},
		{"the tool the prompt names", llm.ToolChoice{}, "search", false, false, "Use search, not lookup_all."},
		{"a name inside a longer word does not count", llm.ToolChoice{}, "get_weather", false, false, "researching lookup_all"},
		{"auto calls the first tool", llm.ToolChoice{Mode: llm.ToolChoiceAuto}, "get_weather", false, false, ""},
		{"required calls the first tool", llm.ToolChoice{Mode: llm.ToolChoiceRequired}, "get_weather", false, false, ""},
		{"named tool", llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "lookup"}, "lookup", false, false, ""},
		{"first allowed tool", llm.ToolChoice{Mode: llm.ToolChoiceRequired, Allowed: []string{"nope", "search"}}, "search", false, false, ""},
		{"none gives text", llm.ToolChoice{Mode: llm.ToolChoiceNone}, "", false, true, ""},
		{"unknown named tool", llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "nope"}, "", true, false, ""},
		{"no allowed tool offered", llm.ToolChoice{Mode: llm.ToolChoiceAuto, Allowed: []string{"nope"}}, "", true, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			req := *three
			req.ToolChoice = tt.choice
			if tt.prompt != "" {
				req.Messages = chatRequest(tt.prompt).Messages
			}
			resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), &req)
			if tt.wantErr {
				var e *llm.Error
				is.True(errors.As(err, &e))
				is.Equal(e.Kind, llm.KindInvalidRequest)
				is.Equal(e.Param, "tool_choice")
				return
			}
			is.NoErr(err)
			if tt.wantText {
				is.Equal(resp.FinishReason, llm.FinishStop)
				is.True(strings.HasPrefix(resp.Text(), "Fixture reply to:"))
				return
			}
			is.Equal(resp.FinishReason, llm.FinishToolCalls)
			call := resp.Content[0].ToolCall
			is.Equal(call.Name, tt.wantName)
			is.True(strings.HasPrefix(call.ID, "call_"))
			is.Equal(len(call.ID), len("call_")+24)
			is.Equal(resp.Usage.OutputTokens, llm.PartTokens(resp.Content[0]))
		})
	}
}

func TestFixture_toolRoundTrip(t *testing.T) {
	is := is.New(t)
	f := upstream.NewFixture(upstream.FixtureOptions{})
	req := withTools(chatRequest("weather in Paris?"), weatherTool)
	first, err := f.Complete(context.Background(), req)
	is.NoErr(err)
	call := first.Content[0].ToolCall

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: first.Content},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{
			CallID: call.ID, Content: []llm.Part{llm.TextPart("sunny,\n 21 °C")},
		}}}},
	)
	second, err := f.Complete(context.Background(), req)
	is.NoErr(err)
	is.Equal(second.FinishReason, llm.FinishStop) // tools still offered, but a result came back
	is.Equal(second.Text(), `Fixture received the result of get_weather: "sunny, 21 °C". This reply is deterministic: the same request always gets the same answer.`)

	req.Messages[len(req.Messages)-1].Parts[0].ToolResult.IsError = true
	third, err := f.Complete(context.Background(), req)
	is.NoErr(err)
	is.True(strings.HasPrefix(third.Text(), `Fixture received an error from get_weather: "sunny, 21 °C".`))
}

func TestFixture_reasoning(t *testing.T) {
	is := is.New(t)
	req := withReasoning(chatRequest("why is the sky blue?"))
	resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
	is.NoErr(err)
	is.Equal(len(resp.Content), 2)
	r := resp.Content[0]
	is.Equal(r.Type, llm.PartReasoning) // reasoning first
	is.True(strings.HasPrefix(r.Text, `Thinking about: "why is the sky blue?"`))
	is.True(strings.HasPrefix(r.Signature, "fxsig_"))
	is.Equal(resp.Content[1].Type, llm.PartText)
	is.Equal(resp.Usage.ReasoningTokens, llm.TextTokens(r.Text))
	is.Equal(resp.Usage.OutputTokens, llm.TextTokens(r.Text)+llm.TextTokens(resp.Text())) // reasoning counted in output

	s, err := upstream.NewFixture(upstream.FixtureOptions{}).Stream(context.Background(), req)
	is.NoErr(err)
	evs := collect(t, s)
	sawText, reasoningEvents := false, 0
	for i, ev := range evs {
		switch ev.Type {
		case llm.EventReasoningDelta:
			is.True(!sawText) // reasoning before any text
			reasoningEvents++
			last := evs[i+1].Type != llm.EventReasoningDelta
			is.Equal(ev.Signature != "", last) // only the last reasoning delta carries the signature
		case llm.EventTextDelta:
			sawText = true
		}
	}
	is.True(reasoningEvents >= 3)
	is.Equal(fold(t, evs).signature, r.Signature)

	off := *req
	off.Reasoning = &llm.Reasoning{Enabled: false}
	plain, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), &off)
	is.NoErr(err)
	is.Equal(len(plain.Content), 1) // reasoning switched off gives none
}

func TestFixture_maxTokens(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		is := is.New(t)
		req := chatRequest("tell me a story")
		req.MaxTokens = 5
		resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(resp.FinishReason, llm.FinishLength)
		is.Equal(resp.Text(), `Fixture reply to`) // 2+2+1 tokens as llm.TextTokens counts (the colon would be the sixth)
		is.Equal(resp.Usage.OutputTokens, 5)
	})
	t.Run("reasoning spends the budget first", func(t *testing.T) {
		is := is.New(t)
		req := withReasoning(chatRequest("tell me a story"))
		req.MaxTokens = 40
		resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(resp.FinishReason, llm.FinishLength)
		is.Equal(resp.Usage.OutputTokens, 40)
		is.Equal(resp.Usage.ReasoningTokens, llm.TextTokens(resp.Content[0].Text)) // whole reasoning
		is.True(resp.Usage.ReasoningTokens < 40)
		is.True(resp.Text() != "") // then as much text as fits
	})
	t.Run("reasoning uses it all", func(t *testing.T) {
		is := is.New(t)
		req := withReasoning(withTools(chatRequest("x"), weatherTool))
		req.MaxTokens = 3
		resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(resp.FinishReason, llm.FinishLength)
		is.Equal(len(resp.Content), 1) // reasoning only: no text, no tool call
		is.Equal(resp.Usage.OutputTokens, 3)
	})
	t.Run("large budget changes nothing", func(t *testing.T) {
		is := is.New(t)
		req := chatRequest("hi")
		req.MaxTokens = 1000
		resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(resp.FinishReason, llm.FinishStop)
	})
}

func TestFixture_stopSequences(t *testing.T) {
	is := is.New(t)
	req := chatRequest("hello")
	req.Stop = []string{"", "deterministic", "reply"}
	resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
	is.NoErr(err)
	is.Equal(resp.FinishReason, llm.FinishStopSequence)
	is.Equal(resp.StopSequence, "reply") // the earliest match wins
	is.Equal(resp.Text(), "Fixture ")
	is.Equal(resp.Usage.OutputTokens, llm.TextTokens("Fixture "))

	req.Stop = []string{"not in the text"}
	resp, err = upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
	is.NoErr(err)
	is.Equal(resp.FinishReason, llm.FinishStop)
	is.Equal(resp.StopSequence, "")

	req.Stop = []string{"deterministic"}
	req.MaxTokens = 2 // length comes before the stop string
	resp, err = upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
	is.NoErr(err)
	is.Equal(resp.FinishReason, llm.FinishLength)
	is.Equal(resp.StopSequence, "")
}

func TestFixture_Stream_matchesComplete(t *testing.T) {
	cached := chatRequest(strings.Repeat("context ", 1200), "question")
	cached.CacheControl = &llm.CacheControl{}
	stopped := chatRequest("hello")
	stopped.Stop = []string{"deterministic"}
	truncated := withReasoning(chatRequest("hello"))
	truncated.MaxTokens = 25
	reqs := map[string]*llm.Request{
		"echo":         chatRequest("hello there, how are you?"),
		"tool call":    withTools(chatRequest("weather?"), toolSchemas[3].schema),
		"empty args":   withTools(chatRequest("weather?"), `{}`),
		"json":         withFormat(chatRequest("x"), `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`),
		"reasoning":    withReasoning(chatRequest("think")),
		"tool+reason":  withReasoning(withTools(chatRequest("think"), weatherTool)),
		"stop":         stopped,
		"max tokens":   truncated,
		"cached":       cached,
		"unicode text": chatRequest("héllo wörld, 東京は晴れ"),
	}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			resp, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
			is.NoErr(err)
			s, err := upstream.NewFixture(upstream.FixtureOptions{}).Stream(context.Background(), req)
			is.NoErr(err)
			evs := collect(t, s)
			got, want := fold(t, evs), fromResponse(resp)
			is.Equal(got.reasoning, want.reasoning)
			is.Equal(got.signature, want.signature)
			is.Equal(got.text, want.text)
			is.Equal(got.args, want.args)
			is.Equal(got.callID, want.callID)
			is.Equal(got.callName, want.callName)
			is.Equal(got.finish, want.finish)
			is.Equal(got.stopSequence, want.stopSequence)
			is.Equal(got.usage, want.usage)
			if len(want.text) >= 3 {
				is.True(got.textEvents >= 3) // several frames
			}
			if want.args != "" {
				is.True(got.argEvents >= 2) // arguments split across frames
				is.True(json.Valid([]byte(got.args)))
			}
		})
	}
}

func TestFixture_promptCaching(t *testing.T) {
	big := strings.Repeat("the quick brown fox ", 400) // ~2000 tokens
	bp := &llm.CacheControl{}

	t.Run("write then read", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{})
		req := &llm.Request{
			System:   []llm.Part{{Type: llm.PartText, Text: big, CacheControl: bp}},
			Messages: []llm.Message{user("question one")},
		}
		prefix := (&llm.Request{System: req.System}).InputTokens()
		first, err := f.Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(first.Usage.CacheCreationTokens, prefix)
		is.Equal(first.Usage.CachedInputTokens, 0)
		is.Equal(first.Usage.CacheCreation1hTokens, 0)
		is.Equal(first.Usage.InputTokens, req.InputTokens())

		second, err := f.Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(second.Usage.CachedInputTokens, prefix)
		is.Equal(second.Usage.CacheCreationTokens, 0)
		is.Equal(second.Text(), first.Text()) // content does not depend on the cache

		other := *req
		other.Messages = []llm.Message{user("a different question")}
		third, err := f.Complete(context.Background(), &other)
		is.NoErr(err)
		is.Equal(third.Usage.CachedInputTokens, prefix) // same prefix, different tail

		fresh, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(fresh.Usage.CachedInputTokens, 0) // the cache belongs to one fixture
	})

	t.Run("one hour writes", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{})
		req := &llm.Request{
			Tools:    []llm.Tool{{Name: "t", Description: big, CacheControl: &llm.CacheControl{TTL: "1h"}}},
			System:   []llm.Part{{Type: llm.PartText, Text: big, CacheControl: bp}},
			Messages: []llm.Message{user("q")},
		}
		toolTokens := llm.ToolTokens(req.Tools[0])
		prefix := (&llm.Request{Tools: req.Tools, System: req.System}).InputTokens()
		resp, err := f.Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(resp.Usage.CacheCreationTokens, prefix)
		is.Equal(resp.Usage.CacheCreation1hTokens, toolTokens) // the part up to the 1h breakpoint
	})

	t.Run("below the minimum nothing is cached", func(t *testing.T) {
		is := is.New(t)
		req := &llm.Request{System: []llm.Part{{Type: llm.PartText, Text: "short", CacheControl: bp}}, Messages: []llm.Message{user("q")}}
		f := upstream.NewFixture(upstream.FixtureOptions{})
		for range 2 {
			resp, err := f.Complete(context.Background(), req)
			is.NoErr(err)
			is.Equal(resp.Usage.CacheCreationTokens, 0)
			is.Equal(resp.Usage.CachedInputTokens, 0)
		}
		low := upstream.NewFixture(upstream.FixtureOptions{MinCacheTokens: -1})
		_, err := low.Complete(context.Background(), req)
		is.NoErr(err)
		resp, err := low.Complete(context.Background(), req)
		is.NoErr(err)
		is.True(resp.Usage.CachedInputTokens > 0) // no minimum
	})

	t.Run("no breakpoint nothing is cached", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{})
		req := &llm.Request{System: []llm.Part{llm.TextPart(big)}, Messages: []llm.Message{user("q")}}
		for range 2 {
			resp, err := f.Complete(context.Background(), req)
			is.NoErr(err)
			is.Equal(resp.Usage.CachedInputTokens+resp.Usage.CacheCreationTokens, 0)
		}
	})

	t.Run("request-level breakpoint caches the whole prompt", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{})
		req := &llm.Request{System: []llm.Part{llm.TextPart(big)}, Messages: []llm.Message{user("q")},
			CacheControl: &llm.CacheControl{TTL: "1h"}}
		resp, err := f.Complete(context.Background(), req)
		is.NoErr(err)
		is.Equal(resp.Usage.CacheCreationTokens, req.InputTokens())
		is.Equal(resp.Usage.CacheCreation1hTokens, req.InputTokens())
	})

	t.Run("next turn reads the previous turn", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{})
		turn1 := &llm.Request{System: []llm.Part{llm.TextPart(big)}, Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "first", CacheControl: bp}}},
		}}
		r1, err := f.Complete(context.Background(), turn1)
		is.NoErr(err)
		is.Equal(r1.Usage.CacheCreationTokens, turn1.InputTokens())

		// The client moves its breakpoint to the newest message.
		turn2 := &llm.Request{System: turn1.System, Messages: []llm.Message{
			user("first"),
			{Role: llm.RoleAssistant, Parts: r1.Content},
			{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "second", CacheControl: bp}}},
		}}
		r2, err := f.Complete(context.Background(), turn2)
		is.NoErr(err)
		is.Equal(r2.Usage.CachedInputTokens, turn1.InputTokens())
		is.Equal(r2.Usage.CacheCreationTokens, turn2.InputTokens()-turn1.InputTokens())
	})
}

func TestFixture_latency(t *testing.T) {
	t.Run("time to first token", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{TimeToFirstToken: 30 * time.Millisecond})
		start := time.Now()
		_, err := f.Complete(context.Background(), chatRequest("hi"))
		is.NoErr(err)
		is.True(time.Since(start) >= 30*time.Millisecond)
	})
	t.Run("tokens per second", func(t *testing.T) {
		is := is.New(t)
		f := upstream.NewFixture(upstream.FixtureOptions{TokensPerSecond: 1000})
		s, err := f.Stream(context.Background(), chatRequest("hi"))
		is.NoErr(err)
		start := time.Now()
		evs := collect(t, s)
		out := fold(t, evs).usage.OutputTokens
		// All but the first event wait for their tokens: most of the output.
		is.True(time.Since(start) >= time.Duration(out/2)*time.Millisecond)
	})
}

func TestFixture_cancel(t *testing.T) {
	slow := upstream.FixtureOptions{TimeToFirstToken: time.Hour}
	t.Run("complete", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := upstream.NewFixture(slow).Complete(ctx, chatRequest("hi"))
		is.True(errors.Is(err, context.Canceled))
		is.True(time.Since(start) < 10*time.Second) // promptly
	})
	t.Run("stream before the first event", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		s, err := upstream.NewFixture(slow).Stream(ctx, chatRequest("hi"))
		is.NoErr(err) // Stream returns at once; the wait is in Next
		defer s.Close()
		time.AfterFunc(20*time.Millisecond, cancel)
		is.True(!s.Next())
		is.True(errors.Is(s.Err(), context.Canceled))
	})
	t.Run("stream mid-way", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		s, err := upstream.NewFixture(upstream.FixtureOptions{TokensPerSecond: 0.001}).Stream(ctx, chatRequest("hi"))
		is.NoErr(err)
		defer s.Close()
		is.True(s.Next()) // the first event does not wait without a time to first token
		time.AfterFunc(20*time.Millisecond, cancel)
		is.True(!s.Next())
		is.True(errors.Is(s.Err(), context.Canceled))
		is.True(!s.Next()) // stays ended
	})
	t.Run("already cancelled", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := upstream.NewFixture(upstream.FixtureOptions{}).Stream(ctx, chatRequest("hi"))
		is.True(errors.Is(err, context.Canceled))
		_, err = upstream.NewFixture(upstream.FixtureOptions{}).Complete(ctx, chatRequest("hi"))
		is.True(errors.Is(err, context.Canceled))
	})
}

func TestFixture_Limits(t *testing.T) {
	is := is.New(t)
	is.Equal(upstream.NewFixture(upstream.FixtureOptions{}).Limits(), upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 32000})
	custom := upstream.Limits{ContextLength: 8192, MaxCompletionTokens: 1024}
	is.Equal(upstream.NewFixture(upstream.FixtureOptions{Limits: custom}).Limits(), custom)
}

func TestFixture_concurrent(t *testing.T) {
	f := upstream.NewFixture(upstream.FixtureOptions{MinCacheTokens: -1})
	req := chatRequest("shared")
	req.CacheControl = &llm.CacheControl{}
	want, err := upstream.NewFixture(upstream.FixtureOptions{}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *llm.Response)
	for range 8 {
		go func() {
			resp, err := f.Complete(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
	}
	for range 8 {
		got := <-done
		if got != nil && !reflect.DeepEqual(got.Content, want.Content) {
			t.Errorf("content differs under concurrency")
		}
	}
}

func BenchmarkFixtureComplete(b *testing.B) {
	f := upstream.NewFixture(upstream.FixtureOptions{})
	req := withTools(chatRequest(strings.Repeat("context ", 200), "What is the weather in Paris?"), weatherTool)
	plain := chatRequest(strings.Repeat("context ", 200), "What is the capital of France?")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := plain
		if i%2 == 1 {
			r = req
		}
		if _, err := f.Complete(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFixtureStream(b *testing.B) {
	f := upstream.NewFixture(upstream.FixtureOptions{})
	req := withReasoning(chatRequest(strings.Repeat("context ", 200), "What is the capital of France?"))
	b.ReportAllocs()
	for b.Loop() {
		s, err := f.Stream(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
