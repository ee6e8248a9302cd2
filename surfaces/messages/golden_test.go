package messages

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The server's codec contract (server/surface.go), restated so this package's
// tests check it structurally without importing server.
type codecContract[S streamContract] interface {
	Surface() llm.Surface
	NewID() string
	DecodeRequest(r *http.Request, body []byte) (*llm.Request, error)
	WriteResponse(w http.ResponseWriter, req *llm.Request, resp *llm.Response) error
	NewStream(req *llm.Request, id string, created time.Time) S
	WriteError(w http.ResponseWriter, err error)
}

type streamContract interface {
	Start(w io.Writer) error
	Event(w io.Writer, ev llm.Event) error
	Error(w io.Writer, err *llm.Error) error
}

var _ codecContract[*Stream] = Codec{}

// goldenJSON compares got with testdata/<name> as JSON values (decode and
// re-marshal, so formatting never matters), or rewrites it under -update.
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		writeGolden(t, path, indentJSON(t, got))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run go test -update)", path, err)
	}
	if d := cmp.Diff(decodeJSON(t, want), decodeJSON(t, got)); d != "" {
		t.Errorf("%s mismatch (-golden +got):\n%s", path, d)
	}
}

// goldenSSE compares a stream with testdata/<name> event by event: the
// event names in order, and each data payload as a JSON value.
func goldenSSE(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		writeGolden(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run go test -update)", path, err)
	}
	if d := cmp.Diff(parseSSE(t, want), parseSSE(t, got)); d != "" {
		t.Errorf("%s mismatch (-golden +got):\n%s", path, d)
	}
}

func writeGolden(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	return v
}

func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		t.Fatalf("indent %q: %v", b, err)
	}
	out.WriteByte('\n')
	return out.Bytes()
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
			cur.Data, haveData = decodeJSON(t, []byte(strings.TrimPrefix(line, "data: "))), true
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events
}
