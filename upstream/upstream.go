// Package upstream owns what every backend shares and no vendor decides:
// the Backend contract (Backend, Stream, Limits, and HTTPOptions for the
// backends that speak a vendor protocol over HTTP), the caller-safe error
// vocabulary backends fail with (errors.go), and the Router that maps a
// request type and effort tier to an ordered list of candidates, with
// retries, fallback, circuit breakers, cache affinity and usage bounds, and
// reports every attempt it made.
//
// The backends are packages of their own: one per vendor protocol
// (upstream/openai, upstream/anthropic, upstream/gemini, over the shared
// transport of upstream/internal/protocol) and the deterministic
// upstream/fixture. cli builds them by protocol name.
//
// upstream imports only llm, and never its own subpackages. Nothing above
// it learns which backend served a call: responses and events come back in
// canonical form, and ids, model names and vendor errors never cross this
// boundary.
package upstream

import (
	"context"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Backend serves canonical requests.
type Backend interface {
	// Complete runs a call to the end and returns the whole reply.
	Complete(ctx context.Context, req *llm.Request) (*llm.Response, error)
	// Stream starts a streamed call. A failure before the first event is
	// returned here, so the caller can still choose an HTTP status.
	Stream(ctx context.Context, req *llm.Request) (Stream, error)
}

// Embedder is a backend that also serves embeddings: OpenAI's
// /embeddings (and every OpenAI-compatible server's: vLLM, llama.cpp's
// server, Ollama, Hugging Face TEI), Gemini's embedContent and
// batchEmbedContents, and the fixture. A backend that does not implement
// it is never routed an embeddings call.
type Embedder interface {
	// Embed embeds every input of req in one call (batched upstream as the
	// protocol allows) and returns one vector per input, in order, of
	// req.Dimensions floats when that is set.
	Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.Embeddings, error)
}

// Stream is a streamed reply, read like sql.Rows:
//
//	for s.Next() { ev := s.Event(); … }
//	if err := s.Err(); err != nil { … }
//
// Callers always Close it. The last event of a successful stream is
// llm.EventFinish, carrying the finish reason and the usage.
//
// A Stream may also implement Ready() bool, reporting whether Next can
// return without waiting (the next event is already buffered, or the
// stream has ended). The server flushes frames to the caller only when the
// stream is not Ready, so a burst of events goes out in one write while a
// lone event is never held back.
type Stream interface {
	Next() bool
	Event() llm.Event
	Err() error
	Close() error
}

// Limits are the token limits of a backend model.
type Limits struct {
	ContextLength       int
	MaxCompletionTokens int
}

// HTTPOptions configures a backend that speaks a vendor protocol over HTTP
// (openai.New, anthropic.New, gemini.New).
//
// Timeouts (zero means none):
//
//   - ConnectTimeout bounds getting a connection: dial and TLS handshake.
//   - FirstByteTimeout bounds the wait from sending the request to the
//     response headers and, for a stream, to its first event. A
//     non-streaming upstream sends its headers only once it has generated
//     the whole reply, so for Complete this is the longest reply accepted.
//   - IdleTimeout bounds every later gap: between two stream events (the
//     timer restarts on each event; SSE comments do not count), or between
//     two reads of a non-streaming body.
//
// A timeout fails the call with an llm.KindTimeout error. There is no
// overall deadline: the caller's context is one.
type HTTPOptions struct {
	// BaseURL is the vendor's base URL: for openai it includes /v1
	// (https://api.openai.com/v1, http://localhost:8000/v1); for anthropic
	// and gemini it does not (https://api.anthropic.com,
	// https://generativelanguage.googleapis.com). Empty means the vendor's
	// public API.
	BaseURL string
	// APIKey authenticates the gateway upstream; empty sends none (local
	// servers).
	APIKey string
	// Model is the backend model name sent upstream. It never reaches a
	// caller.
	Model string
	// Limits are the model's context length and max completion tokens.
	Limits Limits

	ConnectTimeout   time.Duration
	FirstByteTimeout time.Duration
	IdleTimeout      time.Duration

	// Client sends the requests; nil means a transport shared by every
	// backend that has none, tuned for many concurrent streams: HTTP/2
	// where the server offers it, up to 256 idle connections per host, and
	// no overall timeout (the timeouts above time each phase).
	Client *http.Client
	// H2C, with no Client, sends the requests over unencrypted HTTP/2
	// with prior knowledge (a transport shared by every such backend),
	// for a server on an http:// BaseURL that speaks it.
	H2C bool
	// Headers are extra request headers (for example OpenRouter's
	// HTTP-Referer and X-Title).
	Headers map[string]string

	// LegacyMaxTokens (openai protocol only) sends the output cap as
	// max_tokens instead of max_completion_tokens, for older
	// OpenAI-compatible servers that know only the former. OpenAI's own
	// reasoning models reject max_tokens.
	LegacyMaxTokens bool
	// EmbedBatch is the most inputs one embeddings request carries; a
	// call of more goes upstream as several. Zero means the protocol's
	// own (openai 512, gemini 100, its batchEmbedContents limit); a
	// compatible server with a smaller limit (Hugging Face TEI's
	// max_client_batch_size is 32 by default) needs its own. Above the
	// protocol's limit, the protocol's holds.
	EmbedBatch int
	// PromptCacheKey (openai protocol only) sends every call a
	// prompt_cache_key derived from its account (and the caller's own
	// key), so that the upstream's cache routing never mixes tenants.
	// Servers that refuse unknown fields need it off.
	PromptCacheKey bool
}
