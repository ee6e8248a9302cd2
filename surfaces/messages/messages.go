// Package messages serves the messages wire format (Anthropic's Messages
// API) so that the official SDKs work unmodified: it decodes requests into
// llm.Request, encodes llm.Response and llm.Event streams into native JSON and
// SSE frames, counts tokens, lists models and writes the native error
// envelope. Wire details: docs/wire/messages.md.
//
// It imports only llm, surface and the standard library; it never imports
// server and never names a backend.
package messages

import (
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Codec is the messages surface's codec.
type Codec struct{}

// Surface names the wire format.
func (Codec) Surface() llm.Surface { return llm.SurfaceMessages }

// Routes lists POST /v1/messages and its token count. The models list is
// at the /v1/models path the SDKs share (see Claims).
func (Codec) Routes() []surface.Route {
	return []surface.Route{
		{Method: http.MethodPost, Path: "/v1/messages", Endpoint: surface.Generate},
		{Method: http.MethodPost, Path: "/v1/messages/count_tokens", Endpoint: surface.CountTokens},
	}
}

// Fields names the bounded fields in the vendor's words.
func (Codec) Fields() surface.Fields {
	return surface.Fields{Messages: "messages", System: "system", Tools: "tools",
		Schema: "output_config.format.schema", Turn: "messages"}
}

// Claims reports whether r carries the version header every one of the
// vendor's SDKs sends, or its alias x-msgs-version (docs/contract.md#headers).
func (Codec) Claims(r *http.Request) bool {
	return r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Msgs-Version") != ""
}

// NewID returns a fresh message id: "msg_" and 24 base62 characters (see
// llm.NewID), like the vendor's msg_01… ids.
func (Codec) NewID() string { return llm.NewID("msg_", 24) }

// DecodeRequest decodes a POST /v1/messages body. Failures are *llm.Error of
// kind invalid_request naming the offending field in Param.
func (Codec) DecodeRequest(_ *http.Request, body []byte) (*llm.Request, error) {
	return decodeRequest(body, false)
}

// NewStream returns the stateful encoder of one streamed reply.
func (Codec) NewStream(req *llm.Request, id string, created time.Time) surface.Stream {
	return newStream(req, id, created)
}
