// Package surface is the contract between the server and the inference
// wire formats (surfaces/chat, surfaces/messages, surfaces/gencontent): the
// Codec each of them implements, the routes it serves, and what the server
// needs to know of a format besides its bodies — the names of the request
// fields its bounds are about, its models list, its count-tokens endpoint,
// the headers its SDKs announce themselves with. The server holds every
// surface as a Codec and switches on none of them, so adding a surface is
// one package and one line in the server's route table.
//
// It also holds what every surface does the same way with JSON (json.go):
// decoding a request body in one pass into typed wire structs, with the
// failure located for the surface to word (Decode, DecodeError), and
// writing a JSON body (WriteJSON).
//
// surface imports only llm, the standard library and the JSON decoder
// (github.com/go-json-experiment/json); the surfaces import it, and it never
// imports them or the server.
package surface

import (
	"io"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Codec is one inference wire format: it decodes native requests into
// canonical ones, encodes canonical replies, streams and errors back, and
// says which routes it serves.
type Codec interface {
	// Surface names the wire format in records, logs and classification.
	Surface() llm.Surface
	// Routes lists the routes the surface serves. The server mounts each
	// under /svc and at its bare path.
	Routes() []Route
	// Fields names the request fields the server's bounds are about, in
	// the caller's words.
	Fields() Fields
	// NewID returns a fresh gateway-issued id in the format's style
	// (chatcmpl-…, resp_…, msg_…); generation and feedback look calls up by it.
	NewID() string
	// DecodeRequest turns a native request body into a canonical request, or
	// returns an *llm.Error of kind invalid_request.
	DecodeRequest(r *http.Request, body []byte) (*llm.Request, error)
	// WriteResponse encodes a complete reply (status 200) in the native format.
	WriteResponse(w http.ResponseWriter, req *llm.Request, resp *llm.Response) error
	// NewStream returns the encoder of one streamed reply.
	NewStream(req *llm.Request, id string, created time.Time) Stream
	// WriteError writes err in the native envelope with its HTTP status and
	// retry headers. Anything that is not an *llm.Error is an internal error.
	WriteError(w http.ResponseWriter, err error)
}

// Stream turns canonical stream events into native SSE frames. Each method
// writes complete frames (ending in a blank line) to w; the server flushes
// after each call.
type Stream interface {
	// Start writes the frames that open the stream (message_start,
	// response.created, …); it may write nothing.
	Start(w io.Writer) error
	// Event writes the frames for one event. llm.EventFinish is the last
	// event and ends the stream with the format's success terminator.
	Event(w io.Writer, ev llm.Event) error
	// Error writes the format's in-stream error frame after a failure
	// mid-stream; the stream ends there without a success terminator.
	Error(w io.Writer, err *llm.Error) error
}

// Counter is a Codec with a count-tokens endpoint: an advisory estimate
// that never reaches a backend.
type Counter interface {
	// CountTokens decodes body as the format's count-tokens request and
	// writes the count, or the error in the native envelope.
	CountTokens(w http.ResponseWriter, r *http.Request, body []byte)
}

// Lister is a Codec with a models list of its own shape.
type Lister interface {
	// WriteModels writes the models list.
	WriteModels(w http.ResponseWriter, lim Limits)
	// WriteModel writes one model's entry. Any id resolves: model ids are
	// intent.
	WriteModel(w http.ResponseWriter, id string, lim Limits)
}

// Claimer is a Codec whose SDKs can be told apart by their headers alone.
// The server asks it where the path does not say which surface a request
// is for: the /v1/models path all three SDKs share, and unknown paths
// (answered in the envelope of the SDK that asked).
type Claimer interface {
	// Claims reports whether r's headers mark it as sent by one of the
	// surface's SDKs.
	Claims(r *http.Request) bool
}

// Limits are the token limits a models list reports: the routed backends'
// at the time of the call.
type Limits struct {
	ContextLength       int
	MaxCompletionTokens int
}

// Fields name, in a surface's own words, the request fields the server's
// bounds (server.Bounds) are about, so that a request over one is refused
// naming the caller's field. Indices are left out: decoding merges and
// moves turns, so the canonical request's would not match the caller's.
type Fields struct {
	// Messages is the conversation ("messages", "contents", "input").
	Messages string
	// System is the system prompt ("system", "systemInstruction").
	System string
	// Tools is the tool (function) definitions.
	Tools string
	// Schema is the response format's JSON Schema.
	Schema string
	// Turn is what the caller calls one entry of its conversation, plural
	// ("messages", "contents", "input items").
	Turn string
}

// Endpoint is what a route serves.
type Endpoint int

const (
	// Generate is an inference call: DecodeRequest, then WriteResponse or
	// NewStream, metered and billed.
	Generate Endpoint = iota + 1
	// CountTokens is the Counter's endpoint: counted against the caller's
	// requests per minute, never billed.
	CountTokens
	// Models is the Lister's list, or one model's entry when the route's
	// {model...} wildcard names one.
	Models
	// Embed is an embeddings call: the EmbedCodec's DecodeEmbed, then its
	// reply's WriteEmbeddings, metered and billed on its input.
	Embed
)

// EmbedCodec is a Codec with an embeddings endpoint. The server runs an
// embeddings call through the same pipeline as a generation (admission,
// routing, metering, the ledger, the error envelope); only decoding and
// encoding are the surface's.
type EmbedCodec interface {
	// DecodeEmbed turns a native embeddings body into a canonical request,
	// with DefaultDimensions the surface's usual vector length, and the
	// reply that answers it (whose shape may depend on the request: a
	// batch, an encoding). It checks the vendor's own bounds (inputs per
	// request, tokens per input) and returns an *llm.Error of kind
	// invalid_request for a body that breaks them.
	DecodeEmbed(r *http.Request, body []byte) (*llm.EmbedRequest, EmbedReply, error)
}

// EmbedReply writes one embeddings call's reply.
type EmbedReply interface {
	// WriteEmbeddings encodes resp (status 200) in the native format, with
	// the caller's model id.
	WriteEmbeddings(w http.ResponseWriter, model string, resp *llm.Embeddings) error
	// Wire is the form the reply writes vectors in (llm.EmbedWire): a
	// vector an upstream sent in that form is written as it came
	// (resp.Text), any other from its values.
	Wire() llm.EmbedWire
}

// MaxEmbedDimensions is the longest vector a caller may ask for: above
// the largest of the vendors' embedding models (3,072) and of the common
// open ones (4,096), so that a reply's size stays bounded.
const MaxEmbedDimensions = 8192

// Route is one route of a surface.
type Route struct {
	// Method and Path form the net/http ServeMux pattern, without the
	// /svc prefix (the server mounts both). A Models route names a model
	// with a trailing {model...} wildcard.
	Method, Path string
	// Endpoint is what the route serves.
	Endpoint Endpoint
	// Pick, when set, chooses the endpoint of each request instead, for a
	// path that serves several (generate-content's …/models/{model}:{method}).
	// An error is answered in the surface's envelope: a route whose Pick
	// always fails answers that error to any authenticated caller.
	Pick func(r *http.Request) (Endpoint, error)
	// Serves says, for a Pick route, what it serves, in the words of the
	// server's route table (docs/routes.md).
	Serves string
}
