package chat

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// errorBody is the OpenAI error envelope. All four keys are always present
// (param and code may be null): openai-go loses the typed fields otherwise.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// envelope maps an error kind to the OpenAI error type and code. It is the
// one place the chat-completions and Responses surfaces (and the account
// endpoints) decide how a failure looks.
func envelope(k llm.Kind) (typ, code string) {
	switch k {
	case llm.KindInvalidRequest:
		return "invalid_request_error", ""
	case llm.KindAuth:
		return "invalid_request_error", "invalid_api_key"
	case llm.KindPaymentRequired:
		return "insufficient_quota", "insufficient_quota"
	case llm.KindNotFound:
		return "invalid_request_error", "not_found"
	case llm.KindMethodNotAllowed:
		return "invalid_request_error", "method_not_allowed"
	case llm.KindConflict:
		return "invalid_request_error", "conflict"
	case llm.KindTooLarge:
		return "invalid_request_error", "request_too_large"
	case llm.KindRateLimited:
		return "requests", "rate_limit_exceeded"
	case llm.KindOverloaded:
		return "server_error", "server_is_overloaded"
	case llm.KindUnavailable:
		return "service_unavailable_error", "service_unavailable"
	case llm.KindTimeout:
		return "server_error", "timeout"
	default: // upstream, internal
		return "server_error", "server_error"
	}
}

func errorPayload(e *llm.Error) errorObject {
	typ, code := envelope(e.Kind)
	if e.Kind == llm.KindRateLimited && errors.Is(e.Err, llm.ErrTokenRate) {
		typ = "tokens" // OpenAI's type for a tokens-per-minute limit
	}
	obj := errorObject{Message: e.Message, Type: typ}
	if e.Param != "" {
		p := e.Param
		obj.Param = &p
	}
	if code != "" {
		obj.Code = &code
	}
	return obj
}

// WriteError writes err in the OpenAI envelope with its HTTP status. The
// SDKs retry 409, 429 and 5xx by default; x-should-retry tells them not to
// where retrying cannot help, and retry-after(-ms) when to try again.
func WriteError(w http.ResponseWriter, err error) {
	e := llm.AsError(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.Kind.Retryable() {
		h.Set("X-Should-Retry", "true")
	} else {
		h.Set("X-Should-Retry", "false")
	}
	if e.RetryAfter > 0 {
		secs := int(e.RetryAfter.Seconds() + 0.999)
		h.Set("Retry-After", strconv.Itoa(secs))
		h.Set("Retry-After-Ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
	}
	_ = surface.WriteJSON(w, e.Kind.Status(), errorBody{Error: errorPayload(e)})
}

// decodeError words a body's decoding failure (surface.Decode) as OpenAI
// does, naming the field as encoding/json does ("messages.content": no
// indexes), or "body" for the body itself. A wire type's own *llm.Error
// passes as it is.
func decodeError(err error) *llm.Error {
	var pe *llm.Error
	if errors.As(err, &pe) {
		return pe
	}
	var de *surface.DecodeError
	switch {
	case !errors.As(err, &de):
	case de.Syntax != nil:
		return &llm.Error{Kind: llm.KindInvalidRequest,
			Message: "the request body is not valid JSON (at byte " + strconv.FormatInt(de.Syntax.Offset, 10) + ")", Err: err}
	default:
		field := de.Field()
		if field == "" {
			field = "body"
		}
		return &llm.Error{Kind: llm.KindInvalidRequest, Param: field,
			Message: "invalid type for '" + field + "': expected " + de.Wanted() + ", got " + de.Value(), Err: err}
	}
	return &llm.Error{Kind: llm.KindInvalidRequest, Message: "the request body is not valid JSON", Err: err}
}
