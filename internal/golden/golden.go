// Package golden compares test output with golden files under testdata/,
// and rewrites them when the tests run with -update. The surfaces' tests
// share it; it is imported by tests only.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// JSON compares got with testdata/<name> as JSON values (decoded, so
// formatting and key order never matter), or rewrites the file, indented,
// under -update.
func JSON(t *testing.T, name string, got []byte) {
	t.Helper()
	File(t, name, Indent(t, got), func(want, got []byte) {
		t.Helper()
		if d := cmp.Diff(Decode(t, want), Decode(t, got)); d != "" {
			t.Errorf("testdata/%s mismatch (-golden +got):\n%s", name, d)
		}
	})
}

// File hands testdata/<name> and got to compare, or writes got to the file
// under -update.
func File(t *testing.T, name string, got []byte, compare func(want, got []byte)) {
	t.Helper()
	At(t, filepath.Join("testdata", name), got, compare)
}

// At is File for a golden file anywhere in the checkout, at path (relative
// to the test's package): a document the tests keep true, say.
func At(t *testing.T, path string, got []byte, compare func(want, got []byte)) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run go test -update)", path, err)
	}
	compare(want, got)
}

// Decode decodes one JSON value.
func Decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	return v
}

// Indent is b indented two spaces, ending in a newline.
func Indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}
