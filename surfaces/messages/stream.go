package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Stream encodes one streamed reply as native SSE frames
// (docs/wire/messages.md#streaming). It is stateful: it opens a content block on
// the first delta of a new kind, closes it before opening the next, and
// numbers blocks 0, 1, 2, … so that the SDKs' accumulators, which reject
// out-of-order indexes, rebuild the same message a non-streamed call returns.
type Stream struct {
	id    string
	model string
	// estimate is the prompt's estimated input tokens, for message_start
	// when the backend reports no counts before the reply.
	estimate int

	started  bool
	finished bool
	next     int    // index of the next block to open
	open     string // type of the open block: "", "thinking", "text" or "tool_use"
	openIdx  int
	tools    map[int]int // llm tool-call index → block index
	sawText  bool

	// One frame, delta and buffer serve every event, so a text delta
	// costs no allocation once the first frames have sized the buffer.
	buf  bytes.Buffer
	enc  *json.Encoder // writes to buf
	f    frame
	cd   contentDelta
	idx  int
	text string // what cd points at

	// A text, thinking or tool-input delta differs from the one before
	// only in its string while its block stays open: its frame is encoded
	// once with an empty string and split around it (textDelta).
	tmpl struct {
		typ            string
		idx            int
		prefix, suffix []byte
	}
	out []byte // a text delta's frame
}

func newStream(req *llm.Request, id string, _ time.Time) *Stream {
	s := &Stream{id: id, tools: make(map[int]int)}
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	if req != nil {
		s.model = req.Model
		s.estimate = req.InputTokens()
	}
	return s
}

// frame is the union of the stream's event payloads; each event sets the
// fields it carries.
type frame struct {
	Type         string      `json:"type"`
	Message      *message    `json:"message,omitempty"`
	Index        *int        `json:"index,omitempty"`
	ContentBlock *block      `json:"content_block,omitempty"`
	Delta        any         `json:"delta,omitempty"` // *contentDelta or *messageDelta
	Usage        *deltaUsage `json:"usage,omitempty"`
	Error        *errorBody  `json:"error,omitempty"`
}

// contentDelta is a content_block_delta payload; each delta type sets its field.
type contentDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// messageDelta carries the final stop reason. stop_details and container
// are sent as null: the SDK's accumulator overwrites them from every
// message_delta.
type messageDelta struct {
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	StopDetails  *struct{} `json:"stop_details"`
	Container    *struct{} `json:"container"`
}

// write writes one event whose SSE name equals its JSON type: the SDKs
// dispatch on the name and silently drop frames without one.
func (s *Stream) write(w io.Writer, f frame) error {
	if err := s.encode(f); err != nil {
		return err
	}
	_, err := w.Write(s.buf.Bytes())
	return err
}

// encode puts an event's whole frame in buf.
func (s *Stream) encode(f frame) error {
	s.f = f
	s.buf.Reset()
	s.buf.WriteString("event: ")
	s.buf.WriteString(f.Type)
	s.buf.WriteString("\ndata: ")
	if err := s.enc.Encode(&s.f); err != nil { // the JSON and "\n"
		return err
	}
	s.buf.WriteByte('\n')
	return nil
}

// Start writes nothing: message_start goes out with the first event, whose
// usage (when the backend reported its input counts up front) it carries.
// The server pulls the first event before it writes anything, so this
// costs no latency.
func (Stream) Start(io.Writer) error { return nil }

// start writes message_start and a ping. message_start carries the input
// and cache counts, as the vendor's does: clients such as LangChain read
// them only there. They are the backend's when the first event brings them
// (llm.Event.Usage), else the prompt's estimate; message_delta has the
// exact figures at the end either way.
func (s *Stream) start(w io.Writer, first *llm.Usage) error {
	if s.started {
		return nil
	}
	s.started = true
	u := llm.Usage{InputTokens: s.estimate}
	if first != nil {
		u = *first
		u.OutputTokens, u.ReasoningTokens = 0, 0
	}
	usage := toUsage(u)
	err := s.write(w, frame{Type: "message_start", Message: &message{
		ID: s.id, Type: "message", Role: "assistant", Model: s.model,
		Content: []block{}, Usage: usage,
	}})
	if err != nil {
		return err
	}
	return s.write(w, frame{Type: "ping"})
}

// Event writes the frames of one canonical event.
func (s *Stream) Event(w io.Writer, ev llm.Event) error {
	if s.finished {
		return fmt.Errorf("messages stream: event %d after finish", ev.Type)
	}
	if !s.started {
		if err := s.start(w, ev.Usage); err != nil {
			return err
		}
	}
	switch ev.Type {
	case llm.EventReasoningDelta:
		return s.reasoning(w, ev)
	case llm.EventTextDelta:
		if ev.Text == "" {
			return nil
		}
		if s.open != "text" {
			if err := s.openBlock(w, "text", textBlock("")); err != nil {
				return err
			}
		}
		s.sawText = true
		return s.textDelta(w, s.openIdx, "text_delta", ev.Text)
	case llm.EventToolCallStart:
		return s.toolStart(w, ev)
	case llm.EventToolCallDelta:
		idx, ok := s.tools[ev.Index]
		if !ok {
			return fmt.Errorf("messages stream: arguments for tool call %d before its start", ev.Index)
		}
		if ev.Text == "" {
			return nil
		}
		// Normally idx is the open block; a backend that interleaves the
		// arguments of parallel calls gets its late fragments delivered by
		// index, which the SDKs' accumulators apply to the right block.
		return s.textDelta(w, idx, "input_json_delta", ev.Text)
	case llm.EventFinish:
		return s.finish(w, ev)
	}
	return nil
}

// reasoning writes a thinking block's deltas. A signature closes the block.
// Reasoning that arrives after the answer's text has started is dropped
// rather than fragmenting the answer into alternating blocks
// (docs/translation.md#streams).
func (s *Stream) reasoning(w io.Writer, ev llm.Event) error {
	if s.sawText || (ev.Text == "" && ev.Signature == "") {
		return nil
	}
	if s.open != "thinking" {
		if err := s.openBlock(w, "thinking", block{Type: "thinking", Thinking: ptr(""), Signature: ptr("")}); err != nil {
			return err
		}
	}
	if ev.Text != "" {
		if err := s.textDelta(w, s.openIdx, "thinking_delta", ev.Text); err != nil {
			return err
		}
	}
	if ev.Signature != "" {
		// One signature_delta with the whole signature: the TS SDK replaces
		// the signature on each delta, the Go SDK appends.
		if err := s.delta(w, s.openIdx, contentDelta{Type: "signature_delta", Signature: ptr(ev.Signature)}); err != nil {
			return err
		}
		return s.closeBlock(w)
	}
	return nil
}

// toolStart opens a tool_use block with the empty input {} the SDKs
// accumulate input_json_delta fragments onto.
func (s *Stream) toolStart(w io.Writer, ev llm.Event) error {
	if ev.ToolCall == nil {
		return fmt.Errorf("messages stream: tool call %d start without a call", ev.Index)
	}
	if _, dup := s.tools[ev.Index]; dup {
		return fmt.Errorf("messages stream: tool call %d started twice", ev.Index)
	}
	b := toolUseBlock(ev.ToolCall.ID, ev.ToolCall.Name, json.RawMessage(`{}`))
	if err := s.openBlock(w, "tool_use", b); err != nil {
		return err
	}
	s.tools[ev.Index] = s.openIdx
	if args := bytes.TrimSpace(ev.ToolCall.Arguments); len(args) > 0 {
		// Arguments that came whole with the start are streamed as one
		// fragment, never put into the start block (the Go SDK would append
		// the fragments to them).
		return s.delta(w, s.openIdx, contentDelta{Type: "input_json_delta", PartialJSON: ptr(string(args))})
	}
	return nil
}

// finish closes the open block and ends the stream with message_delta (stop
// reason and cumulative usage; output_tokens is mandatory) and message_stop.
func (s *Stream) finish(w io.Writer, ev llm.Event) error {
	if err := s.closeBlock(w); err != nil {
		return err
	}
	s.finished = true
	reason, seq := stopReason(ev.FinishReason, ev.StopSequence)
	var u llm.Usage
	if ev.Usage != nil {
		u = *ev.Usage
	}
	usage := toDeltaUsage(u)
	err := s.write(w, frame{Type: "message_delta",
		Delta: &messageDelta{StopReason: reason, StopSequence: seq},
		Usage: &usage})
	if err != nil {
		return err
	}
	return s.write(w, frame{Type: "message_stop"})
}

// Error writes the in-stream error event after a failure mid-stream. The
// stream ends there: no content_block_stop or message_stop follows.
func (s *Stream) Error(w io.Writer, err *llm.Error) error {
	if s.finished {
		return nil
	}
	s.finished = true
	if err == nil {
		err = &llm.Error{Kind: llm.KindInternal}
	}
	_, typ := errorType(err.Kind)
	return s.write(w, frame{Type: "error", Error: &errorBody{Type: typ, Message: errorMessage(err)}})
}

func (s *Stream) openBlock(w io.Writer, typ string, b block) error {
	if err := s.closeBlock(w); err != nil {
		return err
	}
	s.open, s.openIdx = typ, s.next
	s.next++
	return s.write(w, frame{Type: "content_block_start", Index: &s.openIdx, ContentBlock: &b})
}

func (s *Stream) closeBlock(w io.Writer) error {
	if s.open == "" {
		return nil
	}
	s.open = ""
	idx := s.openIdx
	return s.write(w, frame{Type: "content_block_stop", Index: &idx})
}

func (s *Stream) delta(w io.Writer, idx int, d contentDelta) error {
	s.cd, s.idx = d, idx
	return s.write(w, frame{Type: "content_block_delta", Index: &s.idx, Delta: &s.cd})
}

// textDelta writes the content_block_delta of block idx whose delta, of
// type typ (text_delta, thinking_delta or input_json_delta), carries text:
// the frame delta writes, from a template encoded once per block and type.
func (s *Stream) textDelta(w io.Writer, idx int, typ, text string) error {
	t := &s.tmpl
	if t.prefix == nil || t.idx != idx || t.typ != typ {
		d := contentDelta{Type: typ}
		switch typ {
		case "text_delta":
			d.Text = s.textOf("")
		case "thinking_delta":
			d.Thinking = s.textOf("")
		default:
			d.PartialJSON = s.textOf("")
		}
		s.cd, s.idx = d, idx
		if err := s.encode(frame{Type: "content_block_delta", Index: &s.idx, Delta: &s.cd}); err != nil {
			return err
		}
		// The delta's string is the frame's last member: the last `""}}`.
		b := s.buf.Bytes()
		i := bytes.LastIndex(b, []byte(`""}}`))
		t.typ, t.idx = typ, idx
		t.prefix = append(t.prefix[:0], b[:i]...)
		t.suffix = append(t.suffix[:0], b[i+len(`""`):]...)
	}
	s.out = append(s.out[:0], t.prefix...)
	s.out = surface.AppendString(s.out, text, false) // the encoder does not escape HTML
	s.out = append(s.out, t.suffix...)
	_, err := w.Write(s.out)
	return err
}

// textOf points at a delta's text through the stream, not a fresh copy.
func (s *Stream) textOf(t string) *string {
	s.text = t
	return &s.text
}
