package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

// TestRateLimit_OpenAIEnvelopeNamesTheLimit checks the OpenAI error type of
// a 429: "requests" for requests per minute, "tokens" for tokens per
// minute, as OpenAI itself answers.
func TestRateLimit_OpenAIEnvelopeNamesTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  func(*store.KeyLimits)
		wantTyp string
	}{
		{"requests per minute", func(l *store.KeyLimits) { n := int64(1); l.RPM = &n }, "requests"},
		{"tokens per minute", func(l *store.KeyLimits) { n := int64(20); l.TPM = &n }, "tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			gw := newTestGateway(t)
			_, err := gw.Store.UpdateKeyLimits(context.Background(), gw.KeyID, tc.limits)
			is.NoErr(err)
			resp, _, err := gw.post("/svc/v1/chat/completions", gw.Key, chatCapped16)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK) // a full bucket admits the call
			resp, out, err := gw.post("/svc/v1/chat/completions", gw.Key, chatCapped16)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusTooManyRequests) // the bucket is used up
			var body struct {
				Error struct{ Type, Code string }
			}
			is.NoErr(json.Unmarshal(out, &body))
			is.Equal(body.Error.Type, tc.wantTyp)
			is.Equal(body.Error.Code, "rate_limit_exceeded")
		})
	}
}
