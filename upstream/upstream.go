// Package upstream owns everything behind the canonical model: the Backend
// interface, the Router that maps a request type and effort tier to an
// ordered list of backends (with retries, fallback, circuit breakers and
// cache affinity), and the clients of the three vendor protocols (OpenAI
// chat-completions and compatible servers, Anthropic messages, Gemini
// generate-content). The deterministic fixture backend is upstream/fixture.
//
// upstream imports only llm, and never its own subpackages. Nothing above it learns which backend served a
// call: responses and events come back in canonical form, and ids, model names
// and vendor errors never cross this boundary.
package upstream

import (
	"context"

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
