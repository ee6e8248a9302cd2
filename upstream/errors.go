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
// (statusError, refined by what a vendor's error body says: errorHint),
// and Retryable, the router's test of whether another try may help. The
// vendor's own text is kept only as the cause, for operator logs
// (StatusError).

// Caller-safe messages. None names a backend, a model or a vendor.
const (
	msgRejected     = "the upstream model rejected the request"
	msgContext      = "the request does not fit the model's context window"
	msgTooLarge     = "the request is too large for the upstream model"
	msgCredentials  = "the gateway's upstream credentials were rejected"
	msgQuota        = "the gateway's upstream quota is exhausted"
	msgNotFound     = "the upstream model is not available"
	msgRateLimited  = "the upstream model is rate limited; retry later"
	msgOverloaded   = "the upstream model is overloaded; retry later"
	msgTimeout      = "the upstream model did not respond in time"
	msgStalled      = "the upstream model stopped responding"
	msgFailed       = "the upstream model failed"
	msgUnreachable  = "the upstream model could not be reached"
	msgConnection   = "the connection to the upstream model failed"
	msgMalformed    = "the upstream model sent a malformed reply"
	msgCut          = "the upstream reply ended unexpectedly"
	msgNoReply      = "the upstream model returned no reply"
	msgRemoteImages = "remote image URLs are not supported by this route"
)

// errorHint is what a vendor's error body says beyond its status.
type errorHint struct {
	credentials   bool          // the key is bad (Gemini answers 400)
	quota         bool          // the account is out of credit (OpenAI 429)
	contextLength bool          // the prompt does not fit the context
	retryAfter    time.Duration // from the body (Gemini RetryInfo)
}

// StatusError is the cause, for operator logs, of an *llm.Error made from
// an upstream HTTP error reply or in-stream error event. Body is the start
// of the vendor's error body; it never reaches a caller.
type StatusError struct {
	StatusCode int
	Body       string
	retry      bool
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("upstream status %d: %s", e.StatusCode, e.Body)
}

// statusError maps an upstream error reply to a caller-safe *llm.Error.
func statusError(status int, h http.Header, body []byte, hint errorHint) *llm.Error {
	if len(body) > errorLogBytes {
		body = body[:errorLogBytes]
	}
	cause := &StatusError{StatusCode: status, Body: string(body)}
	e := &llm.Error{Err: cause}
	switch {
	case hint.credentials || status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind, e.Message = llm.KindUpstream, msgCredentials
	case hint.quota || status == http.StatusPaymentRequired:
		e.Kind, e.Message = llm.KindUpstream, msgQuota
	case status == http.StatusTooManyRequests:
		e.Kind, e.Message, cause.retry = llm.KindRateLimited, msgRateLimited, true
	case status == http.StatusServiceUnavailable || status == 529:
		e.Kind, e.Message, cause.retry = llm.KindOverloaded, msgOverloaded, true
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		e.Kind, e.Message, cause.retry = llm.KindTimeout, msgTimeout, true
	case status >= 500:
		e.Kind, e.Message, cause.retry = llm.KindUpstream, msgFailed, true
	case status == http.StatusRequestEntityTooLarge:
		e.Kind, e.Message = llm.KindTooLarge, msgTooLarge
	case hint.contextLength:
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
			e.RetryAfter = hint.retryAfter
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

// streamError maps an in-stream error event, described by an HTTP-like
// status (the vendors' error types map onto one), to an *llm.Error.
func streamError(status int, body []byte, hint errorHint) *llm.Error {
	return statusError(status, nil, body, hint)
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

// malformed is the error for an upstream reply we cannot read.
func malformed(err error) error {
	return &llm.Error{Kind: llm.KindUpstream, Message: msgMalformed, Err: err}
}
