package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestAuth_TwoHeaderStyles pins which key a request names: one key may be
// repeated in several spellings, but two different keys are a 401 in the
// caller's envelope, whichever spellings carry them.
func TestAuth_TwoHeaderStyles(t *testing.T) {
	gw := newTestGateway(t)
	other, _ := gw.newKey(t, "other", "10") // a valid key of another account
	for _, r := range surfaceRoutes {
		for _, tc := range []struct {
			name   string
			header []string
			query  string
			want   int
		}{
			{"the same key twice", []string{"X-Api-Key", gw.Key, "X-Goog-Api-Key", gw.Key}, "", http.StatusOK},
			{"the same key in the query", nil, "?key=" + gw.Key, http.StatusOK},
			{"bearer and x-api-key differ", []string{"X-Api-Key", other}, "", http.StatusUnauthorized},
			{"bearer and x-goog-api-key differ", []string{"X-Goog-Api-Key", other}, "", http.StatusUnauthorized},
			{"x-api-key and x-goog-api-key differ", []string{"Authorization", "", "X-Api-Key", gw.Key, "X-Goog-Api-Key", other}, "", http.StatusUnauthorized},
			{"bearer and the query differ", nil, "?key=" + other, http.StatusUnauthorized},
			{"a valid key and an unknown one", []string{"X-Api-Key", "llm_live_nope"}, "", http.StatusUnauthorized},
		} {
			t.Run(r.path+" "+tc.name, func(t *testing.T) {
				is := is.New(t)
				resp, body := gw.do(t, http.MethodPost, r.path+tc.query, r.body, tc.header...) // Bearer gw.Key unless cleared
				is.Equal(resp.StatusCode, tc.want)
				if tc.want == http.StatusUnauthorized {
					surface, _ := envelopeKind(t, body)
					is.Equal(surface, r.surface) // the caller's own envelope
					if !strings.Contains(tc.name, "unknown") {
						is.True(strings.Contains(string(body), "conflicting API keys"))
					}
					is.True(!strings.Contains(string(body), other) && !strings.Contains(string(body), gw.Key)) // never echoed
				}
			})
		}
	}
}
