package server

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// The pipeline's hooks into the operator's traces (internal/telemetry).
// Each is called only when tracing is on (s.tracer, and so rec.span, set)
// and is never inlined, so that tracing off costs the pipeline a nil
// check and no room in the frames a stream's handler holds (see
// serveStream).

// traceCall starts the call's server span and returns r with it in its
// context, for the admission and ledger spans and the router's attempts
// to be its children.
//
//go:noinline
func (s *Server) traceCall(r *http.Request, rec *logRecord, sf surface.Codec, operation string) *http.Request {
	ctx, sp := s.tracer.StartCall(r.Context(), r.Header, operation, string(sf.Surface()), r.Pattern, rec.id)
	rec.span = sp
	return r.WithContext(ctx)
}

// traceFailure records on the call's span, if it has one, why the call
// was refused or failed.
func (rec *logRecord) traceFailure(err error) {
	if rec != nil && rec.span != nil {
		telemetry.Failed(rec.span, err)
	}
}

// traceRequest describes a decoded, classified call on its span.
//
//go:noinline
func (s *Server) traceRequest(sp trace.Span, c *call) {
	s.tracer.Request(sp, telemetry.Call{
		RequestType: string(c.class.Type),
		Tier:        string(c.class.Tier),
		AccountID:   strconv.FormatInt(c.caller.AccountID, 10),
		KeyID:       c.caller.ID,
		App:         c.app,
		Request:     c.req,
		Embed:       c.embed,
	})
	if c.req != nil && c.req.Stream {
		c.capture = s.tracer.NewCapture()
	}
}

// traceChild starts an internal span of the call (admission, ledger).
//
//go:noinline
func (s *Server) traceChild(ctx context.Context, name string) (context.Context, trace.Span) {
	return s.tracer.StartChild(ctx, name)
}

// traceChildEnd ends an internal span, with why it failed when err is
// not nil.
//
//go:noinline
func traceChildEnd(sp trace.Span, err error) {
	if err != nil {
		telemetry.Failed(sp, err)
	}
	sp.End()
}

// traceMetered records a metered call's usage, cost and finish on its
// span, and a streamed completion when content capture is on.
//
//go:noinline
func (s *Server) traceMetered(sp trace.Span, c *call, m *meterInput, micros int64) {
	s.tracer.Metered(sp, telemetry.Result{
		ResponseID:   c.id,
		Usage:        m.usage,
		FinishReason: m.finish,
		CostMicros:   micros,
		FirstToken:   m.firstByte.Sub(c.start),
	})
	s.tracer.StreamedOutput(sp, c.capture, m.finish)
}

// traceOutput records a whole completion on the call's span when content
// capture is on.
//
//go:noinline
func (s *Server) traceOutput(sp trace.Span, resp *llm.Response) {
	s.tracer.OutputMessages(sp, resp.Content, string(resp.FinishReason))
}

// traceEnd ends the call's span with the response's status.
//
//go:noinline
func traceEnd(rec *logRecord, status int) {
	telemetry.EndCall(rec.span, status)
}

// traceRelease hands the call's span back to the tracer once the access
// line has read its trace id: nothing of the call uses it after that.
//
//go:noinline
func traceRelease(rec *logRecord) {
	telemetry.Release(rec.span)
	rec.span = nil
}
