package gencontent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Stream encodes one streamed reply as :streamGenerateContent?alt=sse
// frames: "data: " and one GenerateContentResponse holding only the new
// parts, then a blank line. There are no event names, comments, keepalives
// or terminator: go-genai fails on any line that is not data or an error
// object, and on a [DONE] (docs/wire/generate-content.md#streaming). The stream
// ends when the connection closes.
//
// Every chunk carries responseId and modelVersion. Text and thought parts
// go out as they come; a function call is held until its arguments are
// complete, since args is one JSON object. The last chunk carries the
// finishReason and the full usageMetadata.
//
// The latest data parts are always held back until the next ones exist, so
// that the last chunk carries real content along with its finishReason, as
// Gemini's own streams do. A final chunk without a data part makes the chat
// helpers of go-genai and python-genai mark the whole turn invalid and
// leave it out of the conversation history.
type Stream struct {
	id, model string
	show      bool // thought parts were asked for

	sigs      sigWriter
	hidden    strings.Builder // text of the open reasoning block, when not shown
	shownOpen bool            // the open reasoning block's text went out as thought parts

	calls []*pendingCall // tool calls being assembled
	held  []part         // data parts not yet written
	done  bool

	// A chunk's frame is written by encode, the parts other than text by
	// the encoder into buf; they serve every chunk, so a text part costs
	// no allocation once the first chunks have sized them.
	frame []byte
	buf   bytes.Buffer
	enc   *json.Encoder // writes to buf

	// A chunk of one text part (or one thought part) differs from the one
	// before only in its text: its frame is encoded once and split around
	// the text (textChunk).
	tmpl [2]textFrame // text, thought: built on first use
	out  []byte       // a text chunk's frame
}

// textFrame is a text chunk's frame around its text.
type textFrame struct{ prefix, suffix []byte }

type pendingCall struct {
	index int
	call  llm.ToolCall
	args  strings.Builder
}

func newStream(req *llm.Request, id string) *Stream {
	s := &Stream{id: id, model: req.Model, show: showThoughts(req)}
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	return s
}

// Start writes nothing: Gemini streams have no opening frame.
func (s *Stream) Start(w io.Writer) error { return nil }

// Event writes the frames of one event (often none: parts are held back).
func (s *Stream) Event(w io.Writer, ev llm.Event) error {
	if s.done {
		return nil
	}
	switch ev.Type {
	case llm.EventReasoningDelta:
		return s.reasoning(w, &ev)
	case llm.EventTextDelta:
		s.endReasoning()
		if err := s.flushCalls(w); err != nil {
			return err
		}
		if ev.Text != "" {
			return s.produce(w, part{Text: ev.Text, ThoughtSignature: s.sigs.take(nil, "")})
		}
	case llm.EventToolCallStart:
		s.endReasoning()
		pc := s.call(ev.Index)
		if tc := ev.ToolCall; tc != nil {
			pc.call.ID, pc.call.Name, pc.call.Signature = tc.ID, tc.Name, tc.Signature
			pc.args.Write(tc.Arguments)
		}
	case llm.EventToolCallDelta:
		s.call(ev.Index).args.WriteString(ev.Text)
	case llm.EventFinish:
		return s.finish(w, &ev)
	}
	return nil
}

// reasoning writes a reasoning delta (one of Event's cases, as finish is).
func (s *Stream) reasoning(w io.Writer, ev *llm.Event) error {
	if err := s.flushCalls(w); err != nil {
		return err
	}
	if ev.Text != "" {
		if s.show {
			s.shownOpen = true
			if err := s.produce(w, part{Text: ev.Text, Thought: true, ThoughtSignature: s.sigs.take(nil, "")}); err != nil {
				return err
			}
		} else {
			s.hidden.WriteString(ev.Text)
		}
	}
	if ev.Signature != "" {
		// The signature closes the block; it rides on the next data
		// part, with the block's text when that was not shown.
		b := sigBlock{Signature: ev.Signature, Merge: s.shownOpen}
		if !s.shownOpen {
			b.Text = s.hidden.String()
		}
		s.sigs.pending = append(s.sigs.pending, b)
		s.endReasoning()
	}
	return nil
}

// finish writes the last chunk.
func (s *Stream) finish(w io.Writer, ev *llm.Event) error {
	if err := s.flushCalls(w); err != nil {
		return err
	}
	var u llm.Usage
	if ev.Usage != nil {
		u = *ev.Usage
	}
	parts := s.sigs.finish(s.held)
	s.held, s.done = nil, true
	return s.writeChunk(w, parts, finishReason(ev.FinishReason), usage(u))
}

// Error writes the in-stream error: the held parts first (they are
// complete), then the error object as a bare line without "data: ", ended by
// a single newline, in a write of its own. That is the one form all three
// SDKs raise (docs/wire/generate-content.md#errors-mid-stream): go-genai and python-genai
// take an unprefixed {"error":…} line as an API error, and js-genai only
// when it arrives alone in a network read. Calls still being assembled are
// incomplete and dropped.
func (s *Stream) Error(w io.Writer, e *llm.Error) error {
	if len(s.held) > 0 {
		parts := s.held
		s.held = nil
		if err := s.writeChunk(w, parts, "", nil); err != nil {
			return err
		}
		if rw, ok := w.(http.ResponseWriter); ok {
			_ = http.NewResponseController(rw).Flush()
		}
	}
	s.done = true
	_, body := errorEnvelopeFor(e, "")
	b, err := marshal(body)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// endReasoning closes the open reasoning block. Hidden text that no
// signature claimed has nothing to replay and is dropped.
func (s *Stream) endReasoning() {
	s.hidden.Reset()
	s.shownOpen = false
}

func (s *Stream) call(index int) *pendingCall {
	for _, pc := range s.calls {
		if pc.index == index {
			return pc
		}
	}
	pc := &pendingCall{index: index}
	s.calls = append(s.calls, pc)
	return pc
}

// flushCalls turns the assembled tool calls into functionCall parts, in
// index order, all in one chunk (Gemini sends parallel calls together).
func (s *Stream) flushCalls(w io.Writer) error {
	if len(s.calls) == 0 {
		return nil
	}
	slices.SortFunc(s.calls, func(a, b *pendingCall) int { return a.index - b.index })
	parts := make([]part, len(s.calls))
	for i, pc := range s.calls {
		pc.call.Arguments = []byte(pc.args.String())
		parts[i] = callPart(&pc.call, s.sigs.take(nil, pc.call.Signature))
	}
	s.calls = nil
	return s.produce(w, parts...)
}

// produce holds parts back, writing the ones held before.
func (s *Stream) produce(w io.Writer, parts ...part) error {
	var err error
	if len(s.held) > 0 {
		err = s.writeChunk(w, s.held, "", nil)
	}
	s.held = append(s.held[:0], parts...)
	return err
}

// writeChunk writes one data frame.
func (s *Stream) writeChunk(w io.Writer, parts []part, finish string, u *usageMetadata) error {
	if len(parts) == 1 && finish == "" && u == nil && textOnly(&parts[0]) {
		return s.textChunk(w, parts[0].Text, parts[0].Thought)
	}
	if err := s.encode(parts, finish, u); err != nil {
		return err
	}
	_, err := w.Write(s.frame)
	return err
}

// textOnly reports whether p is a text or thought part with nothing else.
func textOnly(p *part) bool {
	return p.Text != "" && p.ThoughtSignature == "" && p.InlineData == nil && p.FileData == nil &&
		p.FunctionCall == nil && p.FunctionResponse == nil && p.ExecutableCode == nil && p.CodeExecutionResult == nil
}

// textChunk writes the chunk of one text part, or one thought part: the
// frame writeChunk would encode, from a template.
func (s *Stream) textChunk(w io.Writer, text string, thought bool) error {
	t := &s.tmpl[0]
	if thought {
		t = &s.tmpl[1]
	}
	if t.prefix == nil {
		// The placeholder's `"text":"x"` is the frame's first: the
		// strings after it (model, id) have their quotes escaped.
		if err := s.encode([]part{{Text: "x", Thought: thought}}, "", nil); err != nil {
			return err
		}
		b := s.frame
		i := bytes.Index(b, []byte(`"text":"x"`)) + len(`"text":`)
		t.prefix = bytes.Clone(b[:i])
		t.suffix = bytes.Clone(b[i+len(`"x"`):])
	}
	s.out = append(s.out[:0], t.prefix...)
	s.out = surface.AppendString(s.out, text, false) // the encoder does not escape HTML
	s.out = append(s.out, t.suffix...)
	_, err := w.Write(s.out)
	return err
}

// encode puts one chunk's whole frame in frame: "data: ", the
// generateContentResponse of parts, finish and u, and the blank line. It
// writes what encoding/json writes for that value (FuzzFrame checks it
// byte for byte) but only the parts other than text go through the
// encoder, one at a time: the whole response through it was a dozen reflective
// frames deep, which a stream's handler cannot afford below its finish
// (TestStream_HandlerStackFitsEightKiB).
func (s *Stream) encode(parts []part, finish string, u *usageMetadata) error {
	b := append(s.frame[:0], `data: {"candidates":[{"content":{"role":"model"`...)
	if len(parts) > 0 {
		b = append(b, `,"parts":[`...)
		for i := range parts {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = s.appendPart(b, &parts[i]); err != nil {
				s.frame = b[:0]
				return err
			}
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	if finish != "" {
		b = append(b, `,"finishReason":`...)
		b = surface.AppendString(b, finish, false)
	}
	b = append(b, `,"index":0}]`...)
	if u != nil {
		b = appendUsage(b, u)
	}
	b = append(b, `,"modelVersion":`...)
	b = surface.AppendString(b, s.model, false)
	b = append(b, `,"responseId":`...)
	b = surface.AppendString(b, s.id, false)
	s.frame = append(b, "}\n\n"...)
	return nil
}

// appendPart appends p's JSON: a text or thought part as written here, any
// other through the encoder.
func (s *Stream) appendPart(b []byte, p *part) ([]byte, error) {
	if p.InlineData != nil || p.FileData != nil || p.FunctionCall != nil || p.FunctionResponse != nil ||
		p.ExecutableCode != nil || p.CodeExecutionResult != nil {
		s.buf.Reset()
		if err := s.enc.Encode(p); err != nil {
			return b, err
		}
		return append(b, bytes.TrimSuffix(s.buf.Bytes(), []byte("\n"))...), nil
	}
	b = append(b, '{')
	sep := false
	field := func(name string) {
		if sep {
			b = append(b, ',')
		}
		b = append(b, name...)
		sep = true
	}
	if p.Text != "" {
		field(`"text":`)
		b = surface.AppendString(b, p.Text, false)
	}
	if p.Thought {
		field(`"thought":true`)
	}
	if p.ThoughtSignature != "" {
		field(`"thoughtSignature":`)
		b = surface.AppendString(b, p.ThoughtSignature, false)
	}
	return append(b, '}'), nil
}

// appendUsage appends the usageMetadata member.
func appendUsage(b []byte, u *usageMetadata) []byte {
	b = append(b, `,"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokenCount), 10)
	if u.CachedContentTokenCount != 0 {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.CachedContentTokenCount), 10)
	}
	b = append(b, `,"candidatesTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.CandidatesTokenCount), 10)
	if u.ThoughtsTokenCount != 0 {
		b = append(b, `,"thoughtsTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.ThoughtsTokenCount), 10)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokenCount), 10)
	return append(b, '}')
}
