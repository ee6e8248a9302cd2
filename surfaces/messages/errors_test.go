package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// errorCases has one error per kind (golden in testdata/errors/<name>.json,
// with the status and the headers a caller acts on) plus the cases that
// must not leak their text.
var errorCases = []struct {
	name string
	err  error
}{
	{"invalid_request", llm.InvalidParam("messages.0.content.1.source", "unsupported document source type %q", "url")},
	{"auth", &llm.Error{Kind: llm.KindAuth, Message: "invalid API key"}},
	{"payment_required", &llm.Error{Kind: llm.KindPaymentRequired, Message: "insufficient credits: balance 0.000000 USD"}},
	{"not_found", &llm.Error{Kind: llm.KindNotFound, Message: "no route for GET /v1/nope"}},
	{"conflict", &llm.Error{Kind: llm.KindConflict, Message: "feedback is accepted for 30 days"}},
	{"too_large", &llm.Error{Kind: llm.KindTooLarge, Message: "request body is larger than the limit of 33554432 bytes"}},
	{"rate_limited", &llm.Error{Kind: llm.KindRateLimited, Message: "rate limit exceeded", RetryAfter: 2500 * time.Millisecond}},
	{"rate_limited_long_wait", &llm.Error{Kind: llm.KindRateLimited, Message: "spend cap reached for this hour", RetryAfter: 30 * time.Minute}},
	{"upstream", &llm.Error{Kind: llm.KindUpstream, Message: "the model backend failed", Err: errors.New("backend-x: 500 from api.vendor.example")}},
	{"overloaded", &llm.Error{Kind: llm.KindOverloaded, Message: "Overloaded", RetryAfter: time.Second}},
	{"unavailable", &llm.Error{Kind: llm.KindUnavailable, Message: "the gateway cannot record usage at the moment, so it is not taking billable calls; retry later", RetryAfter: 5 * time.Second}},
	{"timeout", &llm.Error{Kind: llm.KindTimeout, Message: "the model backend timed out"}},
	{"internal", &llm.Error{Kind: llm.KindInternal, Message: "internal error"}},
	{"internal_no_message", &llm.Error{Kind: llm.KindInternal}},
	{"not_an_llm_error", errors.New("dial tcp api.vendor.example:443: connection refused")},
	{"wrapped_llm_error", fmt.Errorf("pipeline: %w", &llm.Error{Kind: llm.KindAuth, Message: "revoked API key"})},
}

// errorRecord is the golden form of an error response.
type errorRecord struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

func TestCodec_WriteError(t *testing.T) {
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			rec := httptest.NewRecorder()
			rec.Header().Set("X-Request-Id", "req_0123")
			Codec{}.WriteError(rec, tt.err)
			got := errorRecord{Status: rec.Code, Headers: map[string]string{}, Body: bytes.TrimSpace(rec.Body.Bytes())}
			for _, h := range []string{"Content-Type", "Retry-After", "Retry-After-Ms", "X-Should-Retry", "Request-Id"} {
				if v := rec.Header().Get(h); v != "" {
					got.Headers[h] = v
				}
			}
			b, err := json.Marshal(got)
			is.NoErr(err)
			goldenJSON(t, filepath.Join("errors", tt.name+".json"), b)

			is.True(!strings.Contains(rec.Body.String(), "vendor")) // never leaks the cause
			is.True(!strings.Contains(rec.Body.String(), "backend-x"))
		})
	}
}

func TestCodec_WriteError_noRequestID(t *testing.T) {
	is := is.New(t)
	rec := httptest.NewRecorder()
	Codec{}.WriteError(rec, &llm.Error{Kind: llm.KindAuth})
	is.Equal(rec.Code, http.StatusUnauthorized)
	var env map[string]any
	is.NoErr(json.Unmarshal(rec.Body.Bytes(), &env))
	v, ok := env["request_id"]
	is.True(ok && v == nil) // request_id is null, not missing
}

func TestStream_Error(t *testing.T) {
	for _, tt := range errorCases {
		e := llm.AsError(tt.err)
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var b bytes.Buffer
			s := newStream(&llm.Request{}, "msg_1", time.Time{})
			is.NoErr(s.Error(&b, e))
			evs := parseSSE(t, b.Bytes())
			is.Equal(len(evs), 1)
			is.Equal(evs[0].Event, "error")
			rec := httptest.NewRecorder()
			Codec{}.WriteError(rec, tt.err)
			var env map[string]any
			is.NoErr(json.Unmarshal(rec.Body.Bytes(), &env))
			is.Equal(evs[0].Data.(map[string]any)["error"], env["error"]) // same error object as the HTTP envelope
		})
	}
}
