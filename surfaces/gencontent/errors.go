package gencontent

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// errorEnvelope is Google's error body (docs/wire/generate-content.md#errors):
// code is the HTTP status, status the google.rpc code name, details typed
// messages. go-genai returns it as an APIError.
type errorEnvelope struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    int           `json:"code"`
	Message string        `json:"message"`
	Status  string        `json:"status"`
	Details []errorDetail `json:"details,omitempty"`
}

// errorDetail is one google.rpc detail message; @type says which of its
// fields are set.
type errorDetail struct {
	Type            string           `json:"@type"`
	Reason          string           `json:"reason,omitempty"`          // ErrorInfo
	Domain          string           `json:"domain,omitempty"`          // ErrorInfo
	RetryDelay      string           `json:"retryDelay,omitempty"`      // RetryInfo
	FieldViolations []fieldViolation `json:"fieldViolations,omitempty"` // BadRequest
}

type fieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

const (
	typeErrorInfo  = "type.googleapis.com/google.rpc.ErrorInfo"
	typeRetryInfo  = "type.googleapis.com/google.rpc.RetryInfo"
	typeBadRequest = "type.googleapis.com/google.rpc.BadRequest"
)

// errorStatus maps an error kind to its HTTP status and google.rpc status.
// This is the surface's one table (docs/design.md#errors). It departs from
// Kind.Status nowhere. An oversized body is 413, like on every svcgw
// surface (Google itself answers 400 "Request payload size exceeds the
// limit"); google.rpc has no status of its own for it, so the status string
// is INVALID_ARGUMENT. The SDKs treat both as non-retryable client errors.
func errorStatus(k llm.Kind) (int, string) {
	switch k {
	case llm.KindInvalidRequest:
		return http.StatusBadRequest, "INVALID_ARGUMENT"
	case llm.KindTooLarge:
		return http.StatusRequestEntityTooLarge, "INVALID_ARGUMENT"
	case llm.KindAuth:
		return http.StatusUnauthorized, "UNAUTHENTICATED"
	case llm.KindPaymentRequired:
		return http.StatusPaymentRequired, "RESOURCE_EXHAUSTED"
	case llm.KindNotFound:
		return http.StatusNotFound, "NOT_FOUND"
	case llm.KindMethodNotAllowed:
		// google.rpc has no code of its own for it.
		return http.StatusMethodNotAllowed, "INVALID_ARGUMENT"
	case llm.KindConflict:
		return http.StatusConflict, "ABORTED"
	case llm.KindRateLimited:
		return http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"
	case llm.KindUpstream:
		return http.StatusBadGateway, "UNAVAILABLE"
	case llm.KindOverloaded, llm.KindUnavailable:
		return http.StatusServiceUnavailable, "UNAVAILABLE"
	case llm.KindTimeout:
		return http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"
	}
	return http.StatusInternalServerError, "INTERNAL"
}

// defaultMessages stand in for an error that carries no message.
var defaultMessages = map[string]string{
	"INVALID_ARGUMENT":   "Request contains an invalid argument.",
	"UNAUTHENTICATED":    "API key not valid. Please pass a valid API key.",
	"RESOURCE_EXHAUSTED": "Resource has been exhausted.",
	"NOT_FOUND":          "Requested entity was not found.",
	"ABORTED":            "The request conflicts with the current state.",
	"UNAVAILABLE":        "The service is currently unavailable.",
	"DEADLINE_EXCEEDED":  "The request timed out.",
	"INTERNAL":           "internal error",
}

// WriteError writes err in the native envelope with its HTTP status, and a
// Retry-After header when the error says when to retry. Anything that is
// not an *llm.Error is an internal error with a generic message: its text
// may name a backend.
func (Codec) WriteError(w http.ResponseWriter, err error) {
	writeError(w, err)
}

func writeError(w http.ResponseWriter, err error) {
	e := llm.AsError(err)
	status, body := errorEnvelopeFor(e, w.Header().Get("X-Request-Id"))
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	_ = writeJSON(w, status, body)
}

// errorEnvelopeFor builds the envelope of e. requestID, when known, is added
// to internal errors so that callers can quote it to the operator.
func errorEnvelopeFor(e *llm.Error, requestID string) (int, errorEnvelope) {
	status, code := errorStatus(e.Kind)
	msg := e.Message
	if msg == "" {
		msg = defaultMessages[code]
	}
	if code == "INTERNAL" && requestID != "" {
		msg += " (request id " + requestID + ")"
	}
	body := errorBody{Code: status, Message: msg, Status: code}
	if e.Kind == llm.KindAuth {
		// Gemini's own invalid-key answer carries this reason, which
		// clients test for.
		body.Details = append(body.Details, errorDetail{Type: typeErrorInfo, Reason: "API_KEY_INVALID", Domain: "svcgw"})
	}
	if e.Param != "" {
		body.Details = append(body.Details, errorDetail{Type: typeBadRequest,
			FieldViolations: []fieldViolation{{Field: e.Param, Description: msg}}})
	}
	if e.RetryAfter > 0 {
		// The SDKs' own retries ignore it; other clients honour it.
		body.Details = append(body.Details, errorDetail{Type: typeRetryInfo, RetryDelay: protoDuration(e.RetryAfter)})
	}
	return status, errorEnvelope{Error: body}
}

// protoDuration renders d as a google.protobuf.Duration in JSON: seconds
// with up to nine fractional digits and an "s".
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
