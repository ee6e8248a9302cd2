package upstream

import "context"

// Tracer, when RouterOptions has one, is told of every attempt the router
// makes (the operator's traces): StartAttempt before it, returning the
// context the attempt runs with; EndAttempt once its outcome is known,
// with that context. n counts the call's attempts from 0; op is what the
// attempt does.
type Tracer interface {
	StartAttempt(ctx context.Context, c *Candidate, n int, retry bool, op Operation) context.Context
	EndAttempt(ctx context.Context, a *Attempt)
}

// Operation is what an attempt asks of its backend, in the OpenTelemetry
// GenAI conventions' words (gen_ai.operation.name).
type Operation string

// The operations: a generation (Complete, Stream) and embeddings (Embed).
const (
	OperationChat       Operation = "chat"
	OperationEmbeddings Operation = "embeddings"
)

type traceparentKey struct{}

// WithTraceparent returns ctx carrying a W3C traceparent value for the
// upstream request made with it to send (a Tracer sets it, only for a
// candidate whose TraceContext allows it).
func WithTraceparent(ctx context.Context, v string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, v)
}

// Traceparent is the traceparent ctx carries for an upstream request, or "".
func Traceparent(ctx context.Context) string {
	v, _ := ctx.Value(traceparentKey{}).(string)
	return v
}

// startAttempt and endAttempt are try's calls to the tracer, out of its
// frame (see logRetry).
//
//go:noinline
func startAttempt(t Tracer, ctx context.Context, c *Candidate, n int, retry bool, op Operation) context.Context {
	return t.StartAttempt(ctx, c, n, retry, op)
}

//go:noinline
func endAttempt(t Tracer, ctx context.Context, a *Attempt) { t.EndAttempt(ctx, a) }
