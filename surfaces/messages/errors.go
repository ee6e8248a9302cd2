package messages

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// errorEnvelope is the native error body (docs/wire/messages.md#errors).
type errorEnvelope struct {
	Type      string    `json:"type"` // "error"
	Error     errorBody `json:"error"`
	RequestID *string   `json:"request_id"`
}

type errorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// errorType maps an error kind to its HTTP status and error.type. This is the
// surface's one table (docs/design.md#errors). It departs from Kind.Status twice:
// overloaded is the vendor's 529 (retried by all three SDKs), and conflict,
// which the vendor does not document, keeps 409 with invalid_request_error.
// unavailable, the gateway's own 503, is api_error: the vendor documents no
// 503 type, and the SDKs retry any 5xx (docs/wire/messages.md#errors).
func errorType(k llm.Kind) (int, string) {
	switch k {
	case llm.KindInvalidRequest:
		return http.StatusBadRequest, "invalid_request_error"
	case llm.KindAuth:
		return http.StatusUnauthorized, "authentication_error"
	case llm.KindPaymentRequired:
		return http.StatusPaymentRequired, "billing_error"
	case llm.KindNotFound:
		return http.StatusNotFound, "not_found_error"
	case llm.KindMethodNotAllowed:
		return http.StatusMethodNotAllowed, "invalid_request_error"
	case llm.KindConflict:
		return http.StatusConflict, "invalid_request_error"
	case llm.KindTooLarge:
		return http.StatusRequestEntityTooLarge, "request_too_large"
	case llm.KindRateLimited:
		return http.StatusTooManyRequests, "rate_limit_error"
	case llm.KindUpstream:
		return http.StatusBadGateway, "api_error"
	case llm.KindOverloaded:
		return 529, "overloaded_error"
	case llm.KindUnavailable:
		return http.StatusServiceUnavailable, "api_error"
	case llm.KindTimeout:
		return http.StatusGatewayTimeout, "timeout_error"
	}
	return http.StatusInternalServerError, "api_error"
}

// defaultMessages are used when an error carries no message.
var defaultMessages = map[string]string{
	"invalid_request_error": "invalid request",
	"authentication_error":  "invalid API key",
	"billing_error":         "insufficient credits",
	"not_found_error":       "not found",
	"request_too_large":     "request is too large",
	"rate_limit_error":      "rate limit exceeded",
	"api_error":             "internal error",
	"overloaded_error":      "overloaded",
	"timeout_error":         "request timed out",
}

// errorMessage is the caller-facing message: the field path first, as in the
// vendor's own validation errors ("messages.0.content: Field required").
func errorMessage(e *llm.Error) string {
	_, typ := errorType(e.Kind)
	msg := e.Message
	if msg == "" {
		msg = defaultMessages[typ]
	}
	if e.Param != "" && !strings.HasPrefix(msg, e.Param) {
		msg = e.Param + ": " + msg
	}
	return msg
}

// maxRetryAfter is the longest wait we let the SDKs sleep through: the TS SDK
// honours any retry-after with no cap, so longer waits are sent with
// x-should-retry: false instead.
const maxRetryAfter = time.Minute

// WriteError writes err in the native envelope with its status and retry
// headers. Any error that is not an *llm.Error is an internal error with a
// generic message: err's text may name a backend and is never sent.
func (Codec) WriteError(w http.ResponseWriter, err error) {
	e := llm.AsError(err)
	if e == nil {
		e = &llm.Error{Kind: llm.KindInternal}
	}
	status, typ := errorType(e.Kind)
	h := w.Header()
	if e.RetryAfter > 0 {
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.Itoa(secs))
		h.Set("Retry-After-Ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	if !e.Kind.Retryable() || e.RetryAfter > maxRetryAfter {
		h.Set("X-Should-Retry", "false")
	}
	env := errorEnvelope{Type: "error", Error: errorBody{Type: typ, Message: errorMessage(e)}}
	if id := requestID(h); id != "" {
		env.RequestID = &id
		h.Set("Request-Id", id)
	}
	_ = surface.WriteJSON(w, status, env)
}

// requestID is the id the server gave the request, read back from the
// response headers it already set.
func requestID(h http.Header) string {
	if id := h.Get("Request-Id"); id != "" {
		return id
	}
	return h.Get("X-Request-Id")
}
