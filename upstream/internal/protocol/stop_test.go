package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

func TestFirstStop(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		stops []string
		at    int
		seq   string
	}{
		{"none", "hello", []string{"x"}, -1, ""},
		{"earliest of two", "one. two! three", []string{"!", "."}, 3, "."},
		{"the one that ends first, though another starts earlier", "abcde", []string{"abcde", "bcd"}, 1, "bcd"},
		{"same end: the longer", "xabc", []string{"bc", "abc"}, 1, "abc"},
		{"multi-byte", "naïve café ☕ time", []string{"☕"}, len("naïve café "), "☕"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			at, seq := firstStop(tt.text, tt.stops)
			is.Equal(at, tt.at)
			is.Equal(seq, tt.seq)
		})
	}
}

func TestStopMatcher_HoldsBackOnlyTheLongestMinusOne(t *testing.T) {
	is := is.New(t)
	m := newStopMatcher([]string{"END", "Observation:"}) // longest: 12 characters
	out, _, ok := m.feed("Thought: look it up.\nAct")
	is.True(!ok)
	is.Equal(out, "Thought: look") // 11 characters held back
	out, _, ok = m.feed("ion: search\nObs")
	is.True(!ok)
	is.Equal(out, " it up.\nAction:")
	out, seq, ok := m.feed("ervation: Paris")
	is.True(ok)
	is.Equal(seq, "Observation:")
	is.Equal(out, " search\n") // the rest of the text before the match, and nothing after
	is.Equal(m.flush(), "")

	// Characters, not bytes: a multi-byte character is held back whole.
	m = newStopMatcher([]string{"→→"})
	out, _, ok = m.feed("a→b→")
	is.True(!ok)
	is.Equal(out, "a→b")
	out, seq, ok = m.feed("→c")
	is.True(ok)
	is.Equal(seq, "→→")
	is.Equal(out, "")

	// A one-character sequence holds nothing back.
	m = newStopMatcher([]string{"\n"})
	out, _, _ = m.feed("no newline yet")
	is.Equal(out, "no newline yet")
}

func TestCutAtStop(t *testing.T) {
	call := llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "search", Arguments: []byte(`{"q":"END"}`)}}
	tests := []struct {
		name   string
		in     []llm.Part
		finish llm.FinishReason
		want   []llm.Part
		reason llm.FinishReason
		seq    string
	}{
		{
			name:   "text after the match and the tool call after it are dropped",
			in:     []llm.Part{{Type: llm.PartReasoning, Text: "plan: END"}, llm.TextPart("Calling. END of turn"), call},
			finish: llm.FinishToolCalls,
			want:   []llm.Part{{Type: llm.PartReasoning, Text: "plan: END"}, llm.TextPart("Calling. ")},
			reason: llm.FinishStopSequence, seq: "END",
		},
		{
			name:   "a match across two text parts",
			in:     []llm.Part{llm.TextPart("one E"), llm.TextPart("ND two")},
			finish: llm.FinishStop,
			want:   []llm.Part{llm.TextPart("one ")},
			reason: llm.FinishStopSequence, seq: "END",
		},
		{
			name:   "no match across a tool call; the reply is unchanged",
			in:     []llm.Part{llm.TextPart("E"), call, llm.TextPart("ND")},
			finish: llm.FinishToolCalls,
			want:   []llm.Part{llm.TextPart("E"), call, llm.TextPart("ND")},
			reason: llm.FinishToolCalls,
		},
		{
			name:   "a match cutting the whole text leaves no empty part",
			in:     []llm.Part{llm.TextPart("END")},
			finish: llm.FinishLength,
			want:   []llm.Part{},
			reason: llm.FinishStopSequence, seq: "END",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &llm.Response{Content: tt.in, FinishReason: tt.finish}
			CutAtStop(resp, []string{"END"})
			if d := cmp.Diff(tt.want, resp.Content); d != "" {
				t.Errorf("content (-want +got):\n%s", d)
			}
			if resp.FinishReason != tt.reason || resp.StopSequence != tt.seq {
				t.Errorf("finish %q %q, want %q %q", resp.FinishReason, resp.StopSequence, tt.reason, tt.seq)
			}
		})
	}
}

// scripted is a Stream replaying events, then err.
type scripted struct {
	evs    []llm.Event
	err    error
	i      int
	closed int
	usage  *llm.Usage // what usageSoFar reports; nil for nothing
}

func (s *scripted) Next() bool {
	if s.closed > 0 || s.i >= len(s.evs) {
		return false
	}
	s.i++
	return true
}
func (s *scripted) Event() llm.Event { return s.evs[s.i-1] }
func (s *scripted) Err() error {
	if s.i < len(s.evs) {
		return nil
	}
	return s.err
}
func (s *scripted) Close() error { s.closed++; return nil }
func (s *scripted) UsageSoFar() (llm.Usage, bool) {
	if s.usage == nil {
		return llm.Usage{}, false
	}
	return *s.usage, true
}

func collect(s upstream.Stream) []llm.Event {
	var out []llm.Event
	for s.Next() {
		out = append(out, s.Event())
	}
	return out
}

func TestStopStream(t *testing.T) {
	text := func(s string) llm.Event { return llm.Event{Type: llm.EventTextDelta, Text: s} }
	finish := llm.Event{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &llm.Usage{InputTokens: 10, OutputTokens: 5}}

	t.Run("held-back text goes out before the events that follow it", func(t *testing.T) {
		up := &scripted{evs: []llm.Event{
			{Type: llm.EventReasoningDelta, Text: "hmm"},
			text("Let me chE"),
			{Type: llm.EventToolCallStart, Index: 0, ToolCall: &llm.ToolCall{ID: "call_1", Name: "f"}},
			{Type: llm.EventToolCallDelta, Index: 0, Text: "{}"},
			text("EN"), finish,
		}}
		got := collect(newStopStream(up, []string{"END"}, 99))
		want := []llm.Event{
			{Type: llm.EventReasoningDelta, Text: "hmm"},
			text("Let me c"), text("hE"), // held back until the tool call
			up.evs[2], up.evs[3],
			text("EN"), finish,
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("events (-want +got):\n%s", d)
		}
	})

	t.Run("a match ends the stream with the usage reported so far", func(t *testing.T) {
		is := is.New(t)
		up := &scripted{evs: []llm.Event{text("abcdefgh STO"), text("P and more"), text("never read"), finish},
			usage: &llm.Usage{InputTokens: 40, CachedInputTokens: 32, OutputTokens: 1}}
		s := newStopStream(up, []string{"STOP"}, 99)
		got := collect(s)
		u := llm.Usage{InputTokens: 40, CachedInputTokens: 32, OutputTokens: 6} // 22 characters streamed
		want := []llm.Event{text("abcdefgh "),
			{Type: llm.EventFinish, FinishReason: llm.FinishStopSequence, StopSequence: "STOP", Usage: &u}}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("events (-want +got):\n%s", d)
		}
		is.Equal(up.closed, 1) // the upstream is let go at the match
		is.NoErr(s.Err())
		is.NoErr(s.Close())
		is.Equal(up.closed, 1) // once
	})

	t.Run("no usage reported: the prompt's estimate", func(t *testing.T) {
		is := is.New(t)
		up := &scripted{evs: []llm.Event{text("x STOP")}}
		got := collect(newStopStream(up, []string{"STOP"}, 99))
		is.Equal(*got[len(got)-1].Usage, llm.Usage{InputTokens: 99, OutputTokens: 2})
	})

	t.Run("an error keeps the held-back text before it", func(t *testing.T) {
		is := is.New(t)
		cut := errors.New("cut")
		up := &scripted{evs: []llm.Event{text("partial ST")}, err: cut}
		s := newStopStream(up, []string{"STOP"}, 99)
		got := collect(s)
		var b strings.Builder
		for _, ev := range got {
			b.WriteString(ev.Text)
		}
		is.Equal(b.String(), "partial ST")
		is.Equal(s.Err(), cut)
	})
}
