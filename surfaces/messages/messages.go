// Package messages serves the messages wire format (Anthropic's Messages
// API) so that the official SDKs work unmodified: it decodes requests into
// llm.Request, encodes llm.Response and llm.Event streams into native JSON and
// SSE frames, counts tokens, lists models and writes the native error
// envelope. Wire details: protocols/messages.md in the shared docs.
//
// It imports only llm and the standard library; it never imports server
// (which uses Codec structurally) and never names a backend.
package messages

import (
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Codec is the messages surface's codec: the server adapts it to its codec
// interface without this package importing server.
type Codec struct{}

// Surface names the wire format.
func (Codec) Surface() llm.Surface { return llm.SurfaceMessages }

// NewID returns a fresh message id: "msg_" and 24 base62 characters (see
// llm.NewID), like the vendor's msg_01… ids.
func (Codec) NewID() string { return llm.NewID("msg_", 24) }

// DecodeRequest decodes a POST /v1/messages body. Failures are *llm.Error of
// kind invalid_request naming the offending field in Param.
func (Codec) DecodeRequest(_ *http.Request, body []byte) (*llm.Request, error) {
	return decodeRequest(body, false)
}

// NewStream returns the stateful encoder of one streamed reply.
func (Codec) NewStream(req *llm.Request, id string, created time.Time) *Stream {
	return newStream(req, id, created)
}
