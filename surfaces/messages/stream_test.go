package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/golden"
	"github.com/svcgw/svcgw/llm"
)

func textEv(s string) llm.Event  { return llm.Event{Type: llm.EventTextDelta, Text: s} }
func thinkEv(s string) llm.Event { return llm.Event{Type: llm.EventReasoningDelta, Text: s} }
func signEv(s string) llm.Event  { return llm.Event{Type: llm.EventReasoningDelta, Signature: s} }
func argsEv(i int, s string) llm.Event {
	return llm.Event{Type: llm.EventToolCallDelta, Index: i, Text: s}
}
func callEv(i int, id, name string) llm.Event {
	return llm.Event{Type: llm.EventToolCallStart, Index: i, ToolCall: &llm.ToolCall{ID: id, Name: name}}
}
func finishEv(f llm.FinishReason, u llm.Usage) llm.Event {
	return llm.Event{Type: llm.EventFinish, FinishReason: f, Usage: &u}
}

// streamCases are canonical event sequences whose frames are golden in
// testdata/stream/<name>.sse. want, when set, is the non-streamed reply the
// SDK's accumulator must rebuild from the frames.
var streamCases = []struct {
	name   string
	events []llm.Event
	err    *llm.Error // written with Stream.Error after the events
	want   *llm.Response
}{
	{
		name: "text",
		events: []llm.Event{textEv("Hel"), textEv(""), textEv("lo, "), textEv("world."),
			finishEv(llm.FinishStop, llm.Usage{InputTokens: 12, OutputTokens: 4})},
		want: &llm.Response{Content: []llm.Part{llm.TextPart("Hello, world.")}, FinishReason: llm.FinishStop,
			Usage: llm.Usage{InputTokens: 12, OutputTokens: 4}},
	},
	{
		name: "thinking_text_tool_use",
		events: []llm.Event{
			thinkEv("User wants "), thinkEv("weather."), signEv("EqQBCkgI"),
			textEv("Let me "), textEv("check."),
			callEv(0, "toolu_01A", "get_weather"), argsEv(0, ""), argsEv(0, `{"ci`), argsEv(0, `ty": "Par`), argsEv(0, `is"}`),
			callEv(1, "toolu_01B", "get_weather"), argsEv(1, `{"city":`), argsEv(1, ` "Rome"}`),
			finishEv(llm.FinishToolCalls, llm.Usage{InputTokens: 1822, CachedInputTokens: 1800, OutputTokens: 64, ReasoningTokens: 20}),
		},
		want: &llm.Response{
			Content: []llm.Part{
				{Type: llm.PartReasoning, Text: "User wants weather.", Signature: "EqQBCkgI"},
				llm.TextPart("Let me check."),
				{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_01A", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}},
				{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_01B", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Rome"}`)}},
			},
			FinishReason: llm.FinishToolCalls,
			Usage:        llm.Usage{InputTokens: 1822, CachedInputTokens: 1800, OutputTokens: 64},
		},
	},
	{
		name: "reasoning_then_tool_with_whole_arguments",
		events: []llm.Event{
			thinkEv("No signature from this backend."),
			{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "toolu_x", Name: "calc", Arguments: json.RawMessage(`{"expr":"2+2"}`)}},
			finishEv(llm.FinishToolCalls, llm.Usage{InputTokens: 30, CacheCreationTokens: 20, CacheCreation1hTokens: 5, OutputTokens: 9}),
		},
		want: &llm.Response{
			Content: []llm.Part{
				{Type: llm.PartReasoning, Text: "No signature from this backend."},
				{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_x", Name: "calc", Arguments: json.RawMessage(`{"expr":"2+2"}`)}},
			},
			FinishReason: llm.FinishToolCalls,
			Usage:        llm.Usage{InputTokens: 30, CacheCreationTokens: 20, OutputTokens: 9},
		},
	},
	{
		name:   "empty_output",
		events: []llm.Event{finishEv(llm.FinishLength, llm.Usage{InputTokens: 7})},
		want:   &llm.Response{FinishReason: llm.FinishLength, Usage: llm.Usage{InputTokens: 7}},
	},
	{
		name: "usage_missing_stop_sequence",
		events: []llm.Event{textEv("one two"),
			{Type: llm.EventFinish, FinishReason: llm.FinishStopSequence, StopSequence: "three"}},
		want: &llm.Response{Content: []llm.Part{llm.TextPart("one two")}, FinishReason: llm.FinishStopSequence, StopSequence: "three"},
	},
	{
		name:   "late_reasoning_dropped",
		events: []llm.Event{thinkEv("First."), textEv("Answer"), thinkEv("late thought"), textEv("."), finishEv(llm.FinishStop, llm.Usage{InputTokens: 3, OutputTokens: 3})},
		want: &llm.Response{Content: []llm.Part{{Type: llm.PartReasoning, Text: "First."}, llm.TextPart("Answer.")},
			FinishReason: llm.FinishStop, Usage: llm.Usage{InputTokens: 3, OutputTokens: 3}},
	},
	{
		// A backend that reports its input counts up front (a messages
		// upstream's message_start): they open the stream.
		name: "input_usage_up_front",
		events: []llm.Event{
			{Type: llm.EventTextDelta, Text: "Cached.", Usage: &llm.Usage{InputTokens: 2322, CachedInputTokens: 1800, CacheCreationTokens: 500, CacheCreation1hTokens: 300}},
			finishEv(llm.FinishStop, llm.Usage{InputTokens: 2322, CachedInputTokens: 1800, CacheCreationTokens: 500, CacheCreation1hTokens: 300, OutputTokens: 3}),
		},
		want: &llm.Response{Content: []llm.Part{llm.TextPart("Cached.")}, FinishReason: llm.FinishStop,
			Usage: llm.Usage{InputTokens: 2322, CachedInputTokens: 1800, CacheCreationTokens: 500, CacheCreation1hTokens: 300, OutputTokens: 3}},
	},
	{
		name:   "mid_stream_error",
		events: []llm.Event{textEv("Partial ans")},
		err:    &llm.Error{Kind: llm.KindOverloaded, Message: "Overloaded", Err: errors.New("backend-x 529")},
	},
}

func encodeStream(t *testing.T, events []llm.Event, serr *llm.Error) []byte {
	t.Helper()
	var b bytes.Buffer
	s := Codec{}.NewStream(&llm.Request{Model: "claude-sonnet-4-5"}, "msg_01GwX3q9", time.Unix(0, 0))
	if err := s.Start(&b); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := s.Event(&b, ev); err != nil {
			t.Fatalf("event %+v: %v", ev, err)
		}
	}
	if serr != nil {
		if err := s.Error(&b, serr); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func TestStream(t *testing.T) {
	for _, tt := range streamCases {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sse := encodeStream(t, tt.events, tt.err)
			goldenSSE(t, filepath.Join("stream", tt.name+".sse"), sse)

			acc, err := sdkAccumulate(t, sse)
			if tt.err != nil {
				var apiErr *anthropic.Error
				is.True(errors.As(err, &apiErr)) // the SDK raises the error event
				is.Equal(string(apiErr.Type()), "overloaded_error")
				return
			}
			is.NoErr(err) // stream reads cleanly
			if tt.want == nil {
				return
			}
			// The accumulated message equals the non-streamed reply.
			resp := *tt.want
			resp.ID, resp.Model = "msg_01GwX3q9", "claude-sonnet-4-5"
			rec := httptest.NewRecorder()
			is.NoErr(Codec{}.WriteResponse(rec, nil, &resp))
			want := sdkMessage(t, rec.Body.Bytes())

			is.Equal(acc.ID, want.ID)
			is.Equal(acc.Model, want.Model)
			is.Equal(acc.StopReason, want.StopReason)
			is.Equal(acc.StopSequence, want.StopSequence)
			is.Equal(acc.Usage.InputTokens, want.Usage.InputTokens)
			is.Equal(acc.Usage.CacheReadInputTokens, want.Usage.CacheReadInputTokens)
			is.Equal(acc.Usage.CacheCreationInputTokens, want.Usage.CacheCreationInputTokens)
			is.Equal(acc.Usage.OutputTokens, want.Usage.OutputTokens)
			if d := cmp.Diff(blocksJSON(t, want.Content), blocksJSON(t, acc.Content)); d != "" {
				t.Errorf("accumulated content differs (-non-streamed +accumulated):\n%s", d)
			}
		})
	}
}

func blocksJSON(t *testing.T, blocks []anthropic.ContentBlockUnion) []any {
	t.Helper()
	out := make([]any, len(blocks))
	for i, b := range blocks {
		out[i] = golden.Decode(t, []byte(b.RawJSON()))
	}
	return out
}

func TestStream_misuse(t *testing.T) {
	t.Run("arguments before their call", func(t *testing.T) {
		is := is.New(t)
		s := newStream(&llm.Request{}, "msg_1", time.Time{})
		var b bytes.Buffer
		is.True(s.Event(&b, argsEv(3, "{}")) != nil)
	})
	t.Run("call started twice", func(t *testing.T) {
		is := is.New(t)
		s := newStream(&llm.Request{}, "msg_1", time.Time{})
		var b bytes.Buffer
		is.NoErr(s.Event(&b, callEv(0, "a", "f")))
		is.True(s.Event(&b, callEv(0, "a", "f")) != nil)
	})
	t.Run("events after finish", func(t *testing.T) {
		is := is.New(t)
		s := newStream(&llm.Request{}, "msg_1", time.Time{})
		var b bytes.Buffer
		is.NoErr(s.Event(&b, finishEv(llm.FinishStop, llm.Usage{})))
		is.True(s.Event(&b, textEv("x")) != nil)
		n := b.Len()
		is.NoErr(s.Error(&b, &llm.Error{Kind: llm.KindInternal}))
		is.Equal(b.Len(), n) // no error frame after message_stop
	})
	t.Run("start written once, implicitly", func(t *testing.T) {
		is := is.New(t)
		s := newStream(&llm.Request{Model: "m"}, "msg_1", time.Time{})
		var b bytes.Buffer
		is.NoErr(s.Event(&b, textEv("x")))
		is.NoErr(s.Start(&b))
		is.Equal(bytes.Count(b.Bytes(), []byte("event: message_start\n")), 1)
	})
	t.Run("message_start estimates the input when the backend reports none up front", func(t *testing.T) {
		is := is.New(t)
		req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(strings.Repeat("word ", 400))}}}}
		s := newStream(req, "msg_1", time.Time{})
		var b bytes.Buffer
		is.NoErr(s.Start(&b))
		is.Equal(b.Len(), 0) // nothing before the first event
		is.NoErr(s.Event(&b, textEv("x")))
		is.NoErr(s.Event(&b, finishEv(llm.FinishStop, llm.Usage{InputTokens: 401, OutputTokens: 1})))
		var start anthropic.MessageStreamEventUnion
		frame := strings.TrimPrefix(strings.SplitN(b.String(), "\n", 3)[1], "data: ")
		is.NoErr(json.Unmarshal([]byte(frame), &start))
		is.Equal(start.Type, "message_start")
		is.Equal(start.Message.Usage.InputTokens, int64(req.InputTokens())) // the estimate, not 0
		is.True(req.InputTokens() > 300)
	})
	t.Run("a tool call without id gets one", func(t *testing.T) {
		is := is.New(t)
		s := newStream(&llm.Request{}, "msg_1", time.Time{})
		var b bytes.Buffer
		is.NoErr(s.Event(&b, callEv(0, "", "f")))
		is.NoErr(s.Event(&b, finishEv(llm.FinishToolCalls, llm.Usage{})))
		acc, err := sdkAccumulate(t, b.Bytes())
		is.NoErr(err)
		is.Equal(len(acc.Content), 1)
		is.Equal(acc.Content[0].ID[:6], "toolu_")
	})
}
