package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	sse "github.com/tmaxmax/go-sse"
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

// FuzzOp is one step of a fuzzed stream: an operation code and its text.
type FuzzOp struct {
	Op   byte
	Text string
}

// FuzzOps splits fuzz input into steps: a byte for the operation, then its
// text up to the next 0xFF byte. The texts are arbitrary bytes — line ends,
// "data:" and invalid UTF-8 included — which is the point.
func FuzzOps(b []byte) []FuzzOp {
	var ops []FuzzOp
	for len(b) > 0 {
		op := b[0]
		text, rest, _ := bytes.Cut(b[1:], []byte{0xFF})
		ops = append(ops, FuzzOp{Op: op, Text: string(text)})
		b = rest
	}
	return ops
}
