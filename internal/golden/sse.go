package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	sse "github.com/tmaxmax/go-sse"

	"github.com/svcgw/svcgw/llm"
)

// SSE streams are checked against github.com/tmaxmax/go-sse, an SSE parser
// svcgw does not use at run time (docs/sse.md): whatever a surface writes
// must read, with a parser written by others to the spec, as exactly the
// events the surface meant.

// SSEEvent is one server-sent event: its event name ("" when it has no
// event line) and its data.
type SSEEvent struct {
	Name, Data string
}

// Frames is an io.Writer that keeps each Write as one frame: a surface's
// stream writes each event with one Write.
type Frames [][]byte

func (f *Frames) Write(p []byte) (int, error) {
	*f = append(*f, bytes.Clone(p))
	return len(p), nil
}

// SplitFrames splits a whole stream into the frames it was written as:
// each event up to and including its blank line ("\n\n"); what follows the
// last one (a bare line) is a frame of its own.
func SplitFrames(b []byte) [][]byte {
	var frames [][]byte
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			return append(frames, b)
		}
		frames = append(frames, b[:i+2])
		b = b[i+2:]
	}
	return frames
}

// Meant returns the events frames stand for. Each frame must be one event
// in the one form svcgw writes — an optional "event: NAME\n", "data: DATA\n"
// and a blank line, NAME and DATA free of CR and LF — or, when bare is set,
// a bare JSON object on one line ("{…}\n", generate-content's mid-stream
// error), which stands for no SSE event at all.
func Meant(t testing.TB, frames [][]byte, bare bool) []SSEEvent {
	t.Helper()
	var events []SSEEvent
	for _, f := range frames {
		if bare && bytes.HasPrefix(f, []byte("{")) {
			line, ok := bytes.CutSuffix(f, []byte("\n"))
			if !ok || bytes.ContainsAny(line, "\r\n") || !json.Valid(line) {
				t.Fatalf("bare frame %q is not one line of JSON", f)
			}
			continue
		}
		rest, ok := bytes.CutSuffix(f, []byte("\n\n"))
		if !ok {
			t.Fatalf("frame %q does not end with a blank line", f)
		}
		var ev SSEEvent
		if name, r, ok := bytes.Cut(rest, []byte("\n")); ok && bytes.HasPrefix(name, []byte("event: ")) {
			ev.Name, rest = string(name[len("event: "):]), r
		}
		data, ok := bytes.CutPrefix(rest, []byte("data: "))
		if !ok || bytes.ContainsAny(data, "\r\n") || bytes.ContainsAny([]byte(ev.Name), "\r\n") {
			t.Fatalf("frame %q is not one event with one data line", f)
		}
		ev.Data = string(data)
		events = append(events, ev)
	}
	return events
}

// ReadSSE reads stream with go-sse.
func ReadSSE(t testing.TB, stream []byte) []SSEEvent {
	t.Helper()
	var events []SSEEvent
	for ev, err := range sse.Read(bytes.NewReader(stream), &sse.ReadConfig{MaxEventSize: len(stream) + 1}) {
		if err != nil {
			t.Fatalf("go-sse: %v", err)
		}
		events = append(events, SSEEvent{Name: ev.Type, Data: ev.Data})
	}
	return events
}

// CheckSSE checks that go-sse reads the frames, written one after the
// other, as exactly the events they were meant to be (Meant), event by
// event: the same names and the same data, in the same order.
func CheckSSE(t testing.TB, frames [][]byte, bare bool) {
	t.Helper()
	meant := Meant(t, frames, bare)
	got := ReadSSE(t, bytes.Join(frames, nil))
	if len(got) != len(meant) {
		t.Fatalf("go-sse read %d events, the surface wrote %d:\n%s", len(got), len(meant), diffEvents(got, meant))
	}
	for i := range got {
		if got[i] != meant[i] {
			t.Fatalf("event %d: go-sse read %q, the surface wrote %q", i, got[i], meant[i])
		}
	}
}

// CheckSSEFiles runs CheckSSE, as a subtest each, on every golden stream
// the glob names (a surface's testdata); it fails when there is none.
func CheckSSEFiles(t *testing.T, glob string, bare bool) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden streams match %s (%v)", glob, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			CheckSSE(t, SplitFrames(b), bare)
		})
	}
}

func diffEvents(got, meant []SSEEvent) string {
	var b bytes.Buffer
	for i := range max(len(got), len(meant)) {
		var g, m SSEEvent
		if i < len(got) {
			g = got[i]
		}
		if i < len(meant) {
			m = meant[i]
		}
		fmt.Fprintf(&b, "%d: go-sse %.60q | meant %.60q\n", i, g, m)
	}
	return b.String()
}

// StreamEncoder is the part of a surface's stream encoder the server
// drives.
type StreamEncoder interface {
	Start(w io.Writer) error
	Event(w io.Writer, ev llm.Event) error
	Error(w io.Writer, err *llm.Error) error
}

// WriteFrames drives s as the server does — Start, the events, then Error
// when fail is set — and returns what it wrote, one frame per Write.
func WriteFrames(t testing.TB, s StreamEncoder, events []llm.Event, fail *llm.Error) Frames {
	t.Helper()
	var frames Frames
	if err := s.Start(&frames); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := s.Event(&frames, ev); err != nil {
			t.Fatalf("event %+v: %v", ev, err)
		}
	}
	if fail != nil {
		if err := s.Error(&frames, fail); err != nil {
			t.Fatal(err)
		}
	}
	return frames
}

// FuzzStream turns fuzz input into a streamed request and a canonical event
// sequence any encoder accepts. The input is a series of steps: a byte
// choosing the step, then its text up to the next 0xFF byte — arbitrary
// bytes, line ends, "data:" and invalid UTF-8 included, which is the point.
// The first step's text is the caller's model id (echoed in every frame)
// and its high bits ask for usage and shown thoughts. Tool calls are
// numbered as they start, arguments go to a started call, and the sequence
// ends at a finish or with an error (fail).
func FuzzStream(b []byte) (req *llm.Request, events []llm.Event, fail *llm.Error) {
	req = &llm.Request{Model: "svc-fusion", Stream: true}
	first, calls := true, 0
	for len(b) > 0 {
		op := b[0]
		raw, rest, _ := bytes.Cut(b[1:], []byte{0xFF})
		b = rest
		text, n := string(raw), len(raw)
		if first {
			first = false
			req.Model, req.IncludeUsage = text, op&0x80 != 0
			if op&0x40 != 0 {
				req.Reasoning = &llm.Reasoning{Enabled: true, IncludeThoughts: true}
			}
		}
		switch op % 7 {
		case 0:
			events = append(events, llm.Event{Type: llm.EventTextDelta, Text: text})
		case 1:
			events = append(events, llm.Event{Type: llm.EventReasoningDelta, Text: text})
		case 2:
			events = append(events, llm.Event{Type: llm.EventReasoningDelta, Signature: text})
		case 3:
			events = append(events, llm.Event{Type: llm.EventToolCallStart, Index: calls,
				ToolCall: &llm.ToolCall{ID: text, Name: text, Arguments: raw[:n/2]}})
			calls++
		case 4:
			if calls > 0 {
				events = append(events, llm.Event{Type: llm.EventToolCallDelta, Index: n % calls, Text: text})
			}
		case 5:
			reasons := []llm.FinishReason{llm.FinishStop, llm.FinishLength, llm.FinishToolCalls, llm.FinishContentFilter, llm.FinishStopSequence}
			u := llm.Usage{InputTokens: n, OutputTokens: int(op), CachedInputTokens: n / 2, ReasoningTokens: int(op) / 2}
			return req, append(events, llm.Event{Type: llm.EventFinish, FinishReason: reasons[n%len(reasons)], StopSequence: text, Usage: &u}), nil
		case 6:
			kinds := []llm.Kind{llm.KindOverloaded, llm.KindUpstream, llm.KindRateLimited, llm.KindInternal, llm.KindInvalidRequest}
			return req, events, &llm.Error{Kind: kinds[n%len(kinds)], Message: text}
		}
	}
	return req, events, nil
}

// SeedStreams adds FuzzStream inputs that step through every kind of
// event, with texts that look like SSE.
func SeedStreams(f *testing.F) {
	f.Add([]byte("\x00Hel\xff\x00lo\xff\x05"))
	f.Add([]byte("\xc1think\n\nhard\xff\x02sig\xff\x00data: x\r\n\r\n\xff\x03call_1\xff\x04{\"a\":\xff\x041}\xff\x05"))
	f.Add([]byte("\x80partial\xff\x06event: error\ndata: {}\n\n"))
	f.Add([]byte("\x03{\"x\":1}\xff\x03\xff\x04[\xff\x00\u2028\xfe\r\xff\x05stop"))
}
