package protocol

import (
	"net/http"
	"testing"

	"github.com/svcgw/svcgw/upstream"
)

// TestRequestURL: the URL parsed once gives what NewRequest's parse gives,
// as a copy the caller may change; a URL that does not parse fails as
// url.Parse fails.
func TestRequestURL(t *testing.T) {
	h := NewClient(upstream.HTTPOptions{}, "http://127.0.0.1:1", nil)
	urls := []string{
		"https://api.openai.com/v1/chat/completions",
		"http://127.0.0.1:8080/v1/chat/completions?x=1",
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
		"http://[::1]:/v1/messages",
		"http://example.com/a%2Fb/c",
	}
	for range 3 {
		for _, raw := range urls {
			want, err := http.NewRequest(http.MethodPost, raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			u, err := h.requestURL(raw)
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if *u != *want.URL || u.Host != want.Host {
				t.Errorf("%s: %#v, want %#v", raw, u, want.URL)
			}
			u.Host, u.Path = "changed", "/changed" // the caller's own
		}
	}
	if _, err := h.requestURL("http://a b/"); err == nil {
		t.Error("a URL that does not parse: no error")
	}
}
