package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// The caller-safe error vocabulary: the messages every failure of a backend
// carries, the mapping of an upstream's error reply to a kind and a message
// (ErrorFromStatus, refined by what a vendor's error body says: ErrorHint),
// and Retryable, the router's test of whether another try may help. The
// vendor's own text is kept only as the cause, for operator logs
// (StatusError).

// Caller-safe messages. None names a backend, a model or a vendor. The
// exported ones are for failures a backend finds itself; ErrorFromStatus
// writes the others.
const (
	msgRejected    = "the upstream model rejected the request"
	msgContext     = "the request does not fit the model's context window"
	msgTooLarge    = "the request is too large for the upstream model"
	msgCredentials = "the gateway's upstream credentials were rejected"
	msgQuota       = "the gateway's upstream quota is exhausted"
	msgNotFound    = "the upstream model is not available"
	msgRateLimited = "the upstream model is rate limited; retry later"
	msgOverloaded  = "the upstream model is overloaded; retry later"
	msgFailed      = "the upstream model failed"
	MsgTimeout     = "the upstream model did not respond in time"
	MsgStalled     = "the upstream model stopped responding"
	MsgUnreachable = "the upstream model could not be reached"
	MsgConnection  = "the connection to the upstream model failed"
	MsgMalformed   = "the upstream model sent a malformed reply"
	MsgCut         = "the upstream reply ended unexpectedly"
	MsgNoReply     = "the upstream model returned no reply"
	// MsgEmbedCount and MsgEmbedShort fail an embeddings reply that does
	// not fit its call.
	MsgEmbedCount = "the upstream model returned a vector count that does not match the inputs"
	MsgEmbedShort = "the upstream model returned vectors shorter than the dimensions asked"
)

// errorLogBytes is how much of an error body a StatusError keeps.
const errorLogBytes = 1 << 10

// ErrorHint is what a vendor's error body says beyond its status.
type ErrorHint struct {
	Credentials   bool          // the key is bad (Gemini answers 400)
	Quota         bool          // the account is out of credit (OpenAI 429)
	ContextLength bool          // the prompt does not fit the context
	RetryAfter    time.Duration // from the body (Gemini RetryInfo)
}

// StatusError is the cause, for operator logs, of an *llm.Error made from
// an upstream HTTP error reply or in-stream error event. Body is the start
// of the vendor's error body; it never reaches a caller.
type StatusError struct {
	StatusCode int
	Body       string
	// Location is a redirect's target: svcgw follows none, so an operator
	// whose upstream moved reads here where to point its base_url.
	Location string
	retry    bool
}

func (e *StatusError) Error() string {
	if e.Location != "" {
		return fmt.Sprintf("upstream status %d (redirect to %s, not followed): %s", e.StatusCode, e.Location, e.Body)
	}
	return fmt.Sprintf("upstream status %d: %s", e.StatusCode, e.Body)
}

// ErrorFromStatus maps an upstream error reply, or an in-stream error event
// described by an HTTP-like status (the vendors' error types map onto one;
// h is then nil), to a caller-safe *llm.Error. body is kept, cut short, in
// its StatusError cause, for operator logs.
func ErrorFromStatus(status int, h http.Header, body []byte, hint ErrorHint) *llm.Error {
	if len(body) > errorLogBytes {
		body = body[:errorLogBytes]
	}
	cause := &StatusError{StatusCode: status, Body: string(body)}
	if status >= 300 && status <= 399 && h != nil {
		cause.Location = h.Get("Location")
	}
	e := &llm.Error{Err: cause}
	switch {
	case hint.Credentials || status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind, e.Message = llm.KindUpstream, msgCredentials
	case hint.Quota || status == http.StatusPaymentRequired:
		e.Kind, e.Message = llm.KindUpstream, msgQuota
	case status == http.StatusTooManyRequests:
		e.Kind, e.Message, cause.retry = llm.KindRateLimited, msgRateLimited, true
	case status == http.StatusServiceUnavailable || status == 529:
		e.Kind, e.Message, cause.retry = llm.KindOverloaded, msgOverloaded, true
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		e.Kind, e.Message, cause.retry = llm.KindTimeout, MsgTimeout, true
	case status >= 500:
		e.Kind, e.Message, cause.retry = llm.KindUpstream, msgFailed, true
	case status == http.StatusRequestEntityTooLarge:
		e.Kind, e.Message = llm.KindTooLarge, msgTooLarge
	case hint.ContextLength:
		e.Kind, e.Message = llm.KindInvalidRequest, msgContext
	case status == http.StatusNotFound:
		e.Kind, e.Message = llm.KindUpstream, msgNotFound
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		e.Kind, e.Message = llm.KindInvalidRequest, msgRejected
	default:
		e.Kind, e.Message = llm.KindUpstream, msgFailed
	}
	if cause.retry {
		e.RetryAfter = retryAfter(h, time.Now())
		if e.RetryAfter == 0 {
			e.RetryAfter = hint.RetryAfter
		}
	}
	return e
}

// retryAfter reads retry-after-ms (milliseconds) or Retry-After (seconds
// or an HTTP date); zero when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e6 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// committedError marks an error that a stream reported after it had
// produced events: the call can no longer be retried or moved.
type committedError struct{ err error }

func (e *committedError) Error() string {
	if e.err == nil {
		return "after the first event"
	}
	return "after the first event: " + e.err.Error()
}
func (e *committedError) Unwrap() error { return e.err }

// Committed marks err as reported by a stream after its first event: the
// call can no longer be retried or moved (see Retryable).
func Committed(err error) error { return &committedError{err: err} }

// Retryable reports whether a failed call may be tried again, on the same
// candidate after a backoff or on the next one: connection failures,
// timeouts, 408, 429 and 5xx replies (529 and overload included) and
// in-stream errors of those kinds, but only while nothing has been
// streamed. It is false for the caller's own cancellation or deadline, for
// errors a Stream reports through Err (its first event has been
// produced), for requests the upstream rejected (4xx), and for bad
// credentials or exhausted quota.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *committedError
	if errors.As(err, &ce) {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.retry
	}
	var le *llm.Error
	if errors.As(err, &le) {
		switch le.Kind {
		case llm.KindRateLimited, llm.KindOverloaded, llm.KindTimeout, llm.KindUpstream:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// Malformed is the error for an upstream reply that cannot be read.
func Malformed(err error) error {
	return &llm.Error{Kind: llm.KindUpstream, Message: MsgMalformed, Err: err}
}
