package protocol

import (
	"strings"
	"unicode/utf8"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// Stop sequences the upstream protocol cannot take.
//
// Each protocol limits the stop sequences it accepts, and the surfaces
// accept what their own vendor does, which can be more: OpenAI's schema
// caps stop at 4 sequences, Gemini's stopSequences at 5, and Anthropic,
// which sets no count, refuses empty and whitespace-only sequences (a
// "\n" from a chat-completions caller). Forwarding such a list fails the
// call with a 400 the caller cannot act on. So each backend sends what
// its protocol accepts (its StopRule) and, when it had to hold any back,
// applies every requested sequence itself: the text is cut before the
// first occurrence, anything after it (text, tool calls) is dropped, and
// the finish reason is llm.FinishStopSequence with the matched sequence,
// which each surface reports in its own vocabulary (chat-completions
// "stop", Responses "completed", messages "stop_sequence" with the
// sequence, generate-content "STOP").
//
// "First" is the occurrence that ends first: the one a model writing the
// text would complete first, which is also what a stream can decide
// without waiting; among occurrences ending at the same place, the one
// that starts first. A match never spans a reasoning part or a tool call:
// only runs of text are searched.
//
// Usage stays what the upstream reported for a complete reply, which it
// generated whole. A stream is closed at the match, which cancels the
// upstream generation; its usage is what the upstream had reported so far
// (Anthropic and Gemini report the input at the start) with the output at
// least the estimate of what was streamed, and the input estimated when
// nothing was reported (chat-completions reports usage only at the end).

// StopRule returns the stop sequences a protocol accepts out of stops.
type StopRule func(stops []string) []string

// GatewayStops returns the stop sequences the gateway must apply itself
// when rule decides what goes upstream: nil when the upstream takes them
// all, every non-empty one otherwise.
func GatewayStops(rule StopRule, stops []string) []string {
	if len(rule(stops)) == len(stops) {
		return nil
	}
	var out []string
	for _, s := range stops {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// firstStop finds the stop sequence in text that ends first (see above):
// its position and the sequence, or -1.
func firstStop(text string, stops []string) (at int, seq string) {
	at, end := -1, 0
	for _, s := range stops {
		i := strings.Index(text, s)
		if i < 0 {
			continue
		}
		if e := i + len(s); at < 0 || e < end || e == end && i < at {
			at, end, seq = i, e, s
		}
	}
	return at, seq
}

// stopMatcher finds stop sequences in text that arrives in pieces. It holds
// back the end of the text that a sequence could still begin in: as many
// characters as the longest sequence has, minus one.
type stopMatcher struct {
	stops []string
	hold  int    // characters held back at most
	buf   string // text received and not yet returned
}

func newStopMatcher(stops []string) *stopMatcher {
	m := &stopMatcher{stops: stops}
	for _, s := range stops {
		m.hold = max(m.hold, utf8.RuneCountInString(s)-1)
	}
	return m
}

// feed adds text and returns what may be passed on. When a sequence has
// matched, ok is true, out is the text before it, and nothing more may be
// passed on.
func (m *stopMatcher) feed(text string) (out, seq string, ok bool) {
	m.buf += text
	if at, s := firstStop(m.buf, m.stops); at >= 0 {
		out, m.buf = m.buf[:at], ""
		return out, s, true
	}
	cut := len(m.buf)
	for n := 0; n < m.hold && cut > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(m.buf[:cut])
		cut -= size
	}
	out, m.buf = m.buf[:cut], m.buf[cut:]
	return out, "", false
}

// flush returns the text held back: a run of text has ended.
func (m *stopMatcher) flush() string {
	out := m.buf
	m.buf = ""
	return out
}

// CutAtStop applies stops to a complete reply (see above).
func CutAtStop(resp *llm.Response, stops []string) {
	m := newStopMatcher(stops)
	out := make([]llm.Part, 0, len(resp.Content))
	var text strings.Builder
	endText := func() {
		if text.Len() > 0 {
			out = append(out, llm.TextPart(text.String()))
			text.Reset()
		}
	}
	for _, p := range resp.Content {
		if p.Type != llm.PartText {
			text.WriteString(m.flush())
			endText()
			out = append(out, p)
			continue
		}
		t, seq, ok := m.feed(p.Text)
		text.WriteString(t)
		if ok {
			endText()
			resp.Content, resp.FinishReason, resp.StopSequence = out, llm.FinishStopSequence, seq
			return
		}
	}
	text.WriteString(m.flush())
	endText()
	resp.Content = out
}

// Stopped wraps a protocol stream in a stopStream when rule holds back
// some of req's stop sequences. The stream keeps the stop sequences and the
// prompt's estimate, not req.
func Stopped(s upstream.Stream, err error, rule StopRule, req *llm.Request) (upstream.Stream, error) {
	if err != nil {
		return s, err
	}
	if stops := GatewayStops(rule, req.Stop); len(stops) > 0 {
		return newStopStream(s, stops, req.InputTokens()), nil
	}
	return s, nil
}

// stopStream applies stops to a stream (see above).
type stopStream struct {
	s     upstream.Stream
	m     *stopMatcher
	input int // the prompt's estimated tokens, for a cut without usage
	runes int // the characters received, for the output estimate

	queue  []llm.Event
	pos    int
	cur    llm.Event
	done   bool // the stream has ended: nothing more to read from s
	closed bool
}

// streamUsage is what a protocol stream has reported so far; ok is false
// before any report.
type streamUsage interface {
	UsageSoFar() (u llm.Usage, ok bool)
}

func newStopStream(s upstream.Stream, stops []string, inputTokens int) *stopStream {
	return &stopStream{s: s, m: newStopMatcher(stops), input: inputTokens}
}

func (s *stopStream) Next() bool {
	for s.pos >= len(s.queue) {
		if s.done {
			return false
		}
		s.queue, s.pos = s.queue[:0], 0
		s.fill()
	}
	s.cur = s.queue[s.pos]
	s.pos++
	return true
}

// fill reads one upstream event and queues what it turns into.
func (s *stopStream) fill() {
	if !s.s.Next() {
		s.flushText() // the held-back text, before the error Err reports
		s.done = true
		return
	}
	ev := s.s.Event()
	s.runes += utf8.RuneCountInString(ev.Text)
	if ev.Type != llm.EventTextDelta {
		s.flushText()
		s.queue = append(s.queue, ev)
		s.done = ev.Type == llm.EventFinish
		return
	}
	t, seq, ok := s.m.feed(ev.Text)
	if t != "" {
		s.queue = append(s.queue, llm.Event{Type: llm.EventTextDelta, Text: t})
	}
	if !ok {
		return
	}
	u := llm.Usage{InputTokens: s.input}
	if su, ok := s.s.(streamUsage); ok {
		if v, ok := su.UsageSoFar(); ok {
			u = v
		}
	}
	if u.InputTokens <= 0 {
		u.InputTokens = s.input
	}
	u.OutputTokens = max(u.OutputTokens, (s.runes+3)/4) // llm.TextTokens' rule
	s.queue = append(s.queue, llm.Event{Type: llm.EventFinish, FinishReason: llm.FinishStopSequence, StopSequence: seq, Usage: &u})
	s.done = true
	// Stop the upstream now: the caller has all it will get.
	_ = s.Close()
}

func (s *stopStream) flushText() {
	if t := s.m.flush(); t != "" {
		s.queue = append(s.queue, llm.Event{Type: llm.EventTextDelta, Text: t})
	}
}

func (s *stopStream) Event() llm.Event { return s.cur }

// Ready reports whether Next can return without waiting. A buffered
// upstream event may turn into nothing the caller sees (held-back text),
// so only events already decided count.
func (s *stopStream) Ready() bool { return s.pos < len(s.queue) || s.done }

func (s *stopStream) Err() error { return s.s.Err() }

func (s *stopStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.s.Close()
}
