package messages

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/internal/golden"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// The codec satisfies the server's contract (surface.Codec) and its
// optional parts.
var (
	_ surface.Codec   = Codec{}
	_ surface.Counter = Codec{}
	_ surface.Lister  = Codec{}
	_ surface.Claimer = Codec{}
	_ surface.Stream  = (*Stream)(nil)
)

// goldenJSON compares got with testdata/<name> as JSON values, or
// rewrites it under -update.
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.JSON(t, name, got)
}

// goldenSSE compares a stream with testdata/<name> event by event: the
// event names in order, and each data payload as a JSON value.
func goldenSSE(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.File(t, name, got, func(want, got []byte) {
		t.Helper()
		if d := cmp.Diff(parseSSE(t, want), parseSSE(t, got)); d != "" {
			t.Errorf("testdata/%s mismatch (-golden +got):\n%s", name, d)
		}
	})
}

// sseEvent is one parsed SSE frame.
type sseEvent struct {
	Event string
	Data  any
}

// parseSSE splits a stream into frames. Every frame must have exactly one
// event line and one data line holding JSON whose type equals the event
// name: the SDKs dispatch on the name and drop unnamed frames.
func parseSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n\n")) {
		t.Errorf("stream does not end with a blank line: %q", b)
	}
	var events []sseEvent
	var cur sseEvent
	var haveData bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event == "" || !haveData {
				t.Fatalf("incomplete frame %+v", cur)
			}
			if typ, _ := cur.Data.(map[string]any)["type"].(string); typ != cur.Event {
				t.Errorf("frame %q carries JSON type %q", cur.Event, typ)
			}
			events = append(events, cur)
			cur, haveData = sseEvent{}, false
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if haveData {
				t.Fatalf("frame %q has two data lines", cur.Event)
			}
			cur.Data, haveData = golden.Decode(t, []byte(strings.TrimPrefix(line, "data: "))), true
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events
}
