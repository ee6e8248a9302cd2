package server

import (
	"net/http"
	"testing"

	"github.com/matryer/is"
)

// TestMessages_VersionHeaderIsNotChecked pins what the README says: the
// anthropic-version header (or x-msgs-version) is optional and its value
// is not checked; the messages surface speaks 2023-06-01 whatever it says.
func TestMessages_VersionHeaderIsNotChecked(t *testing.T) {
	gw := newTestGateway(t)
	for _, h := range [][]string{
		{"Anthropic-Version", "2023-06-01"},
		{"Anthropic-Version", "2023-01-01"},
		{"Anthropic-Version", "latest"},
		{"X-Msgs-Version", "2023-06-01"},
		{"Anthropic-Version", ""},
	} {
		t.Run(h[0]+"="+h[1], func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, http.MethodPost, "/svc/v1/messages", capped16, h...)
			is.Equal(resp.StatusCode, http.StatusOK) // served
			is.True(len(body) > 0)
		})
	}
}
