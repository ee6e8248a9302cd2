package llm

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a failure a caller sees. Each surface maps every kind to its
// own native envelope and HTTP status in exactly one place.
type Kind string

// The error kinds. Overloaded is an upstream's state (the messages surface
// sends it as the vendor's 529); unavailable is the gateway refusing work it
// could not account for — its ledger cannot record usage, or its database
// does not answer in time — and is 503 on every surface.
const (
	KindInvalidRequest   Kind = "invalid_request"    // 400
	KindAuth             Kind = "auth"               // 401
	KindPaymentRequired  Kind = "payment_required"   // 402
	KindNotFound         Kind = "not_found"          // 404
	KindMethodNotAllowed Kind = "method_not_allowed" // 405: the path is served, not with this method
	KindConflict         Kind = "conflict"           // 409
	KindTooLarge         Kind = "too_large"          // 413
	KindRateLimited      Kind = "rate_limited"       // 429
	KindUpstream         Kind = "upstream"           // 502
	KindOverloaded       Kind = "overloaded"         // 503
	KindUnavailable      Kind = "unavailable"        // 503, the gateway's own: see below
	KindTimeout          Kind = "timeout"            // 504
	KindInternal         Kind = "internal"           // 500
)

// Status is the HTTP status of the kind.
func (k Kind) Status() int {
	switch k {
	case KindInvalidRequest:
		return 400
	case KindAuth:
		return 401
	case KindPaymentRequired:
		return 402
	case KindNotFound:
		return 404
	case KindMethodNotAllowed:
		return 405
	case KindConflict:
		return 409
	case KindTooLarge:
		return 413
	case KindRateLimited:
		return 429
	case KindUpstream:
		return 502
	case KindOverloaded, KindUnavailable:
		return 503
	case KindTimeout:
		return 504
	default:
		return 500
	}
}

// Retryable reports whether retrying the same call later may succeed.
func (k Kind) Retryable() bool {
	switch k {
	case KindRateLimited, KindUpstream, KindOverloaded, KindUnavailable, KindTimeout, KindInternal:
		return true
	}
	return false
}

// Error is a failure with a caller-safe message.
type Error struct {
	Kind Kind
	// Message is safe for callers: it never names a backend, model or vendor.
	Message string
	// Param names the offending request field, when there is one.
	Param string
	// RetryAfter is how long the caller should wait; zero when none.
	RetryAfter time.Duration
	// Err is the cause, for operator logs only.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of kind k with a formatted message.
//
// Errorf, InvalidParam (and the surfaces' field-path helpers) are the cold
// paths of request decoding, kept out of line: inlined, each call's
// formatting took its own room in the decoder's frame, success or not
// (docs/architecture.md, "The stream stack").
//
//go:noinline
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// InvalidParam returns an invalid_request error that names the field.
//
//go:noinline
func InvalidParam(param, format string, args ...any) *Error {
	return &Error{Kind: KindInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error. Anything that is not one becomes an
// internal error with a generic message, keeping err as the cause for logs.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInternal, Message: "internal error", Err: err}
}

// ErrTokenRate is the cause of a rate_limited error refused for the key's
// tokens per minute rather than its requests per minute. A surface whose
// envelope tells the two apart (OpenAI's type "tokens" against
// "requests") tests for it with errors.Is.
var ErrTokenRate = errors.New("tokens per minute exceeded")
