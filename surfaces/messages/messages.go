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
	"crypto/rand"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Codec is the messages surface's codec: the server adapts it to its codec
// interface without this package importing server.
type Codec struct{}

// Surface names the wire format.
func (Codec) Surface() llm.Surface { return llm.SurfaceMessages }

// idAlphabet is base62: message ids look like the vendor's msg_01… ids.
const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns a fresh message id: "msg_" and 24 base62 characters from
// crypto/rand.
func (Codec) NewID() string { return "msg_" + randomBase62(24) }

// randomBase62 returns n uniformly random base62 characters. Bytes ≥ 248
// are rejected so that every character is equally likely (248 = 4·62).
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	var buf [32]byte
	for len(out) < n {
		_, _ = rand.Read(buf[:]) // never fails (crypto/rand panics instead)
		for _, b := range buf {
			if b < 248 && len(out) < n {
				out = append(out, idAlphabet[b%62])
			}
		}
	}
	return string(out)
}

// DecodeRequest decodes a POST /v1/messages body. Failures are *llm.Error of
// kind invalid_request naming the offending field in Param.
func (Codec) DecodeRequest(_ *http.Request, body []byte) (*llm.Request, error) {
	return decodeRequest(body, false)
}

// NewStream returns the stateful encoder of one streamed reply.
func (Codec) NewStream(req *llm.Request, id string, created time.Time) *Stream {
	return newStream(req, id, created)
}
