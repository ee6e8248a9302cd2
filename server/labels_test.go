package server

import (
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/matryer/is"
)

func TestLabel(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain passes", "My App", "My App"},
		{"empty", "", ""},
		{"surrounding space trimmed", "  My App \t", "My App"},
		{"runs of white space become one", "My \t\u00a0  App", "My App"},
		{"control characters count as spaces", "My\x00App\x1b[31m\x7f!", "My App [31m !"},
		{"C1 controls too", "a\u0085b\u009bc", "a b c"},
		{"line breaks", "line1\r\nline2", "line1 line2"},
		{"invalid UTF-8 is replaced", "caf\xe9 app", "caf\ufffd app"},
		{"bidi overrides are dropped", "abc\u202Egnp.exe", "abcgnp.exe"},
		{"non-ASCII kept", "日本語のアプリ 🚀", "日本語のアプリ 🚀"},
		{"only controls is empty", "\x00\x01\t ", ""},
		{"cut at 128 characters", strings.Repeat("é", 300), strings.Repeat("é", 128)},
		{"never ends with the space before a cut", strings.Repeat("a", 127) + " b", strings.Repeat("a", 127)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got := label(tt.in)
			is.Equal(got, tt.want)
			is.True(utf8.ValidString(got))
			is.True(utf8.RuneCountInString(got) <= maxLabelRunes)
			is.Equal(label(got), got) // normal form is stable
		})
	}
}

func TestLabel_PlainLabelsDoNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = label("Acme Coding Agent v2.1") }); n != 0 {
		t.Fatalf("label allocates %v times for a plain label", n)
	}
}

// A 1 MB X-Title no longer reaches the ledger or the usage report.
func TestGateway_ApplicationLabelsAreBounded(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	huge := strings.Repeat("A", 1<<20)
	for _, h := range []struct{ name, value string }{
		{"X-Title", huge},
		{"X-Title", "  Evil\u202E\t\tapp\xc3 "}, // what net/http lets through: tabs, any bytes above 0x7f
		{"Referer", "https://" + strings.Repeat("x", 300) + ".example/"},
	} {
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody, h.name, h.value)
		is.Equal(resp.StatusCode, http.StatusOK)
		g := gw.generation(t, completionID(t, body, false))
		is.True(utf8.RuneCountInString(g.Application) <= maxLabelRunes) // bounded
		is.Equal(g.Application, label(g.Application))                   // normal
	}
	u := gw.usage(t, "application")
	got := map[string]bool{}
	for _, b := range u.Data {
		got[b.Bucket] = true
	}
	is.True(got[strings.Repeat("A", 128)]) // the 1 MB title, cut
	is.True(got["Evil app\ufffd"])         // overrides, runs of space and broken UTF-8 gone
	is.True(got[strings.Repeat("x", 128)]) // a long Referer host, cut
}

// TestHeaderValue: Get's answer for the canonical keys the call path reads,
// whatever spelling the caller sent (net/http canonicalizes them on reading).
func TestHeaderValue(t *testing.T) {
	for _, k := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "X-Gen-Api-Key", "X-Svc-Effort", "X-Title", "Referer"} {
		if textproto.CanonicalMIMEHeaderKey(k) != k {
			t.Errorf("%s is not canonical", k)
		}
		for _, sent := range []string{k, strings.ToLower(k), strings.ToUpper(k)} {
			h := http.Header{}
			h.Add(sent, "v1")
			h.Add(sent, "v2")
			if got := headerValue(h, k); got != h.Get(k) || got != "v1" {
				t.Errorf("%s sent as %s: %q, Get %q", k, sent, got, h.Get(k))
			}
		}
		if headerValue(http.Header{}, k) != "" || headerValue(nil, k) != "" {
			t.Errorf("%s: a value from an empty header", k)
		}
	}
}
