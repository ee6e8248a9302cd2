package gencontent

import (
	"encoding/json"
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

// goldenSSE compares a stream with testdata/<name> frame by frame: each data
// payload, and each bare error line, as a JSON value.
func goldenSSE(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.File(t, name, got, func(want, got []byte) {
		t.Helper()
		if d := cmp.Diff(parseStream(t, want), parseStream(t, got)); d != "" {
			t.Errorf("testdata/%s mismatch (-golden +got):\n%s", name, d)
		}
	})
}

// frame is one element of a generate-content stream.
type frame struct {
	Error bool // a bare {"error":…} line rather than a data frame
	JSON  any
}

// parseStream splits a stream the way go-genai reads it: tokens separated by
// a blank line, each either "data: <one line of JSON>" or, for an error, a
// bare JSON object. Anything else (event:, comments, [DONE], multi-line
// data) fails the test.
func parseStream(t *testing.T, b []byte) []frame {
	t.Helper()
	var frames []frame
	for _, tok := range strings.Split(string(b), "\n\n") {
		tok = strings.TrimSuffix(tok, "\n")
		if tok == "" {
			continue
		}
		if strings.Contains(tok, "\n") {
			t.Fatalf("stream token spans lines: %q", tok)
		}
		if data, ok := strings.CutPrefix(tok, "data: "); ok {
			frames = append(frames, frame{JSON: golden.Decode(t, []byte(data))})
			continue
		}
		if !strings.HasPrefix(tok, `{"error":`) {
			t.Fatalf("stream token is neither data nor an error: %q", tok)
		}
		frames = append(frames, frame{Error: true, JSON: golden.Decode(t, []byte(tok))})
	}
	return frames
}

// canonicalJSON renders a canonical value for golden comparison.
func canonicalJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
