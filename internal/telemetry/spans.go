package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// The attributes, as the OpenTelemetry GenAI semantic conventions name
// them (gen_ai.*, error.type, http.*), and svcgw's own (svcgw.*).
const (
	attrOperation = "gen_ai.operation.name"
	// attrEmbedDimensions is the GenAI conventions' name for an
	// embedding's length; attrEmbedInputs, how many inputs a call
	// embeds, is svcgw's.
	attrEmbedDimensions = "gen_ai.embeddings.dimension.count"
	attrEmbedInputs     = "svcgw.embeddings.inputs"
	attrProvider        = "gen_ai.provider.name"
	attrRequestModel    = "gen_ai.request.model"
	attrMaxTokens       = "gen_ai.request.max_tokens"
	attrTemperature     = "gen_ai.request.temperature"
	attrTopP            = "gen_ai.request.top_p"
	attrResponseID      = "gen_ai.response.id"
	attrResponseModel   = "gen_ai.response.model"
	attrFinishReasons   = "gen_ai.response.finish_reasons"
	attrInputTokens     = "gen_ai.usage.input_tokens"
	attrOutputTokens    = "gen_ai.usage.output_tokens"
	attrCacheRead       = "gen_ai.usage.cache_read.input_tokens"
	attrCacheWrite      = "gen_ai.usage.cache_creation.input_tokens"
	attrInputMessages   = "gen_ai.input.messages"
	attrOutputMessages  = "gen_ai.output.messages"
	attrErrorType       = "error.type"
	attrStatusCode      = "http.response.status_code"
	attrMethod          = "http.request.method"
	attrRoute           = "http.route"

	attrRequestID   = "svcgw.request_id"
	attrSurface     = "svcgw.surface"
	attrRequestType = "svcgw.request_type"
	attrTier        = "svcgw.tier"
	attrAccount     = "svcgw.account_id"
	attrKeyID       = "svcgw.key_id"
	attrApplication = "svcgw.application"
	attrCost        = "svcgw.cost_usd"
	attrStreamed    = "svcgw.streamed"
	attrTTFT        = "svcgw.time_to_first_token_ms"
	attrReasoning   = "svcgw.usage.reasoning_tokens"
	attrRefusal     = "svcgw.refusal"
	attrUpstream    = "svcgw.upstream"
	attrProtocol    = "svcgw.upstream.protocol"
	attrAttempt     = "svcgw.attempt"
	attrRetry       = "svcgw.retry"
	attrFallback    = "svcgw.fallback"
	attrBackoff     = "svcgw.backoff_ms"
	attrOutcome     = "svcgw.outcome"
	attrBreaker     = "svcgw.breaker_open"
)

// The gen_ai.operation.name values of the calls svcgw serves: a
// generation is chat on every surface (chat-completions, the Responses
// API, messages, generate-content), an embeddings call embeddings.
const (
	OperationChat       = string(upstream.OperationChat)
	OperationEmbeddings = string(upstream.OperationEmbeddings)
)

// StartCall starts the server span of an inference call of operation
// (OperationChat, OperationEmbeddings). A W3C traceparent in h makes it a
// child of the caller's span; without one it begins a trace. The span is
// named by its operation until Request names the model.
func (t *Tracer) StartCall(ctx context.Context, h http.Header, operation, surface, route, requestID string) (context.Context, trace.Span) {
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	return t.tracer.Start(ctx, operation, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String(attrOperation, operation),
		attribute.String(attrSurface, surface),
		attribute.String(attrMethod, http.MethodPost),
		attribute.String(attrRoute, route),
		attribute.String(attrRequestID, requestID),
	))
}

// Call is what the server knows of a call once it is decoded and
// classified: a generation's Request, or an embeddings call's Embed.
type Call struct {
	RequestType, Tier     string
	AccountID, KeyID, App string
	Request               *llm.Request
	Embed                 *llm.EmbedRequest
}

// Request describes the call on its span: the GenAI request attributes
// (the caller's model id, max_tokens, temperature, top_p when given) and
// svcgw's (type, tier, account, key, application), and the prompt when
// content capture is on.
func (t *Tracer) Request(sp trace.Span, c Call) {
	if c.Embed != nil {
		t.embedRequest(sp, c)
		return
	}
	req := c.Request
	sp.SetName(OperationChat + " " + req.Model)
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		attribute.String(attrRequestModel, req.Model),
		attribute.String(attrRequestType, c.RequestType),
		attribute.String(attrTier, c.Tier),
		attribute.String(attrAccount, c.AccountID),
		attribute.String(attrKeyID, c.KeyID),
		attribute.String(attrApplication, c.App),
		attribute.Bool(attrStreamed, req.Stream),
	)
	if req.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int(attrMaxTokens, req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64(attrTemperature, *req.Temperature))
	}
	if req.TopP != nil {
		attrs = append(attrs, attribute.Float64(attrTopP, *req.TopP))
	}
	if t.capture {
		attrs = append(attrs, attribute.String(attrInputMessages, t.inputMessages(req)))
	}
	sp.SetAttributes(attrs...)
}

// embedRequest is Request for an embeddings call: the span is named
// "embeddings {model}", with the GenAI request attributes an embeddings
// call has (the model id, the dimensions asked for) and svcgw's. The
// inputs are never recorded, content capture or not: they are documents.
func (t *Tracer) embedRequest(sp trace.Span, c Call) {
	req := c.Embed
	sp.SetName(OperationEmbeddings + " " + req.Model)
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		attribute.String(attrRequestModel, req.Model),
		attribute.String(attrRequestType, c.RequestType),
		attribute.String(attrTier, c.Tier),
		attribute.String(attrAccount, c.AccountID),
		attribute.String(attrKeyID, c.KeyID),
		attribute.String(attrApplication, c.App),
		attribute.Bool(attrStreamed, false),
		attribute.Int(attrEmbedInputs, len(req.Inputs)),
	)
	if req.Dimensions > 0 {
		attrs = append(attrs, attribute.Int(attrEmbedDimensions, req.Dimensions))
	}
	sp.SetAttributes(attrs...)
}

// Result is a metered call's outcome.
type Result struct {
	// ResponseID is the id the caller got, the generation's.
	ResponseID   string
	Usage        llm.Usage
	FinishReason string
	CostMicros   int64
	// FirstToken is how long the caller waited for the first byte of the
	// reply (for a call that did not stream, the whole reply).
	FirstToken time.Duration
}

// Metered records a call's usage, cost and finish on its span.
func (t *Tracer) Metered(sp trace.Span, r Result) {
	var buf [9]attribute.KeyValue
	attrs := append(buf[:0],
		attribute.String(attrResponseID, r.ResponseID),
		attribute.Int(attrInputTokens, r.Usage.InputTokens),
		attribute.Int(attrOutputTokens, r.Usage.OutputTokens),
		attribute.Int(attrCacheRead, r.Usage.CachedInputTokens),
		attribute.Float64(attrCost, float64(r.CostMicros)/1e6),
		attribute.Float64(attrTTFT, float64(r.FirstToken.Microseconds())/1e3),
	)
	if r.FinishReason != "" { // an embedding has none
		attrs = append(attrs, attribute.StringSlice(attrFinishReasons, []string{r.FinishReason}))
	}
	// The rarer counts only when there are some.
	if r.Usage.CacheCreationTokens > 0 {
		attrs = append(attrs, attribute.Int(attrCacheWrite, r.Usage.CacheCreationTokens))
	}
	if r.Usage.ReasoningTokens > 0 {
		attrs = append(attrs, attribute.Int(attrReasoning, r.Usage.ReasoningTokens))
	}
	sp.SetAttributes(attrs...)
}

// Failed records on sp why its call was refused or failed: the error's
// kind as error.type, and the caller's message (which never names a
// backend) as the refusal and the span's status description. The cause
// behind it, for the operator, is recorded as the span's exception.
func Failed(sp trace.Span, err error) {
	var le *llm.Error
	if !errors.As(err, &le) {
		sp.SetAttributes(attribute.String(attrErrorType, string(llm.KindInternal)))
		sp.SetStatus(codes.Error, "internal error")
		return
	}
	sp.SetAttributes(attribute.String(attrErrorType, string(le.Kind)), attribute.String(attrRefusal, le.Message))
	sp.SetStatus(codes.Error, le.Message)
	if le.Err != nil {
		sp.RecordError(le.Err)
	}
}

// EndCall ends the server span of a call answered with status.
func EndCall(sp trace.Span, status int) {
	sp.SetAttributes(attribute.Int(attrStatusCode, status))
	if status >= 500 {
		sp.SetStatus(codes.Error, http.StatusText(status))
	}
	sp.End()
}

// TraceID is the trace id of sp, as the access log writes it.
func TraceID(sp trace.Span) string {
	return sp.SpanContext().TraceID().String()
}

// Child names the internal spans of a call.
const (
	SpanAdmission = "svcgw.admission" // tokens per minute, balance and spend caps
	SpanLedger    = "svcgw.ledger"    // the generation record handed to the ledger writer
)

// StartChild starts an internal span of the call whose span ctx holds.
func (t *Tracer) StartChild(ctx context.Context, name string) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
}

// EndChild ends an internal span; err, when not nil, is why it failed, and
// is recorded on the call's span too (parent).
func EndChild(sp, parent trace.Span, err error) {
	if err != nil {
		Failed(sp, err)
		Failed(parent, err)
	}
	sp.End()
}

// StartAttempt starts the client span of one upstream attempt (it
// implements upstream.Tracer): named by the operation and the backend
// model, with the upstream's name and protocol. n counts the call's
// attempts from 0. When the candidate's upstream accepts trace context,
// the attempt's traceparent goes in ctx for the request to carry.
func (t *Tracer) StartAttempt(ctx context.Context, c *upstream.Candidate, n int, retry bool, op upstream.Operation) context.Context {
	ctx, sp := t.tracer.Start(ctx, string(op)+" "+c.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(attrOperation, string(op)),
		attribute.String(attrProvider, provider(c.Protocol)),
		attribute.String(attrRequestModel, c.Model),
		attribute.String(attrUpstream, c.Upstream),
		attribute.String(attrProtocol, c.Protocol),
		attribute.Int(attrAttempt, n),
		attribute.Bool(attrRetry, retry),
		attribute.Bool(attrFallback, n > 0 && !retry),
	))
	if c.TraceContext {
		ctx = upstream.WithTraceparent(ctx, traceparent(sp.SpanContext()))
	}
	return ctx
}

// EndAttempt ends the attempt's span with its outcome: for a stream, at
// its first event (the rest of the stream is the call's).
func (t *Tracer) EndAttempt(ctx context.Context, a *upstream.Attempt) {
	sp := trace.SpanFromContext(ctx)
	// One SetAttributes, and what is zero left out: each attribute costs
	// its span's snapshot and the export's encoding.
	var buf [4]attribute.KeyValue
	attrs := append(buf[:0], attribute.String(attrOutcome, string(a.Outcome)))
	if a.Backoff > 0 {
		attrs = append(attrs, attribute.Float64(attrBackoff, float64(a.Backoff.Microseconds())/1e3))
	}
	if a.BreakerOpen {
		attrs = append(attrs, attribute.Bool(attrBreaker, true))
	}
	if a.Outcome == upstream.OutcomeOK {
		sp.SetAttributes(append(attrs, attribute.String(attrResponseModel, modelOf(sp)))...)
	} else {
		sp.SetAttributes(append(attrs, attribute.String(attrErrorType, string(a.Outcome)))...)
		msg := string(a.Outcome)
		if a.Err != nil {
			msg = a.Err.Error() // names the backend: the operator's only
			sp.RecordError(a.Err)
		}
		sp.SetStatus(codes.Error, msg)
	}
	sp.End()
}

var _ upstream.Tracer = (*Tracer)(nil)

// modelOf is the backend model an attempt's span was started for: the
// model that answered, when it succeeded (the router asks one model per
// candidate, and vendors answer with the model asked for, give or take a
// dated suffix the canonical reply does not keep).
func modelOf(sp trace.Span) string {
	if ro, ok := sp.(interface{ Name() string }); ok {
		return strings.TrimPrefix(ro.Name(), OperationChat+" ")
	}
	return ""
}

// provider is gen_ai.provider.name for an upstream protocol.
func provider(protocol string) string {
	switch protocol {
	case "openai":
		return "openai"
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	}
	return "svcgw." + protocol
}

// traceparent is the W3C traceparent header of sc.
func traceparent(sc trace.SpanContext) string {
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
}

// message is one entry of gen_ai.input.messages / gen_ai.output.messages,
// in the conventions' JSON shape.
type message struct {
	Role         string        `json:"role"`
	Parts        []messagePart `json:"parts"`
	FinishReason string        `json:"finish_reason,omitempty"`
}

type messagePart struct {
	Type    string `json:"type"`
	Content string `json:"content,omitempty"`
}

// inputMessages is the prompt as gen_ai.input.messages, cut to the limit:
// text and reasoning as they are, other parts by their type alone.
func (t *Tracer) inputMessages(req *llm.Request) string {
	ms := make([]message, 0, len(req.Messages)+1)
	if len(req.System) > 0 {
		ms = append(ms, message{Role: string(llm.RoleSystem), Parts: parts(req.System)})
	}
	for _, m := range req.Messages {
		ms = append(ms, message{Role: string(m.Role), Parts: parts(m.Parts)})
	}
	return t.bounded(ms)
}

// OutputMessages records a completion on sp as gen_ai.output.messages
// when content capture is on.
func (t *Tracer) OutputMessages(sp trace.Span, content []llm.Part, finish string) {
	if !t.capture {
		return
	}
	sp.SetAttributes(attribute.String(attrOutputMessages, t.bounded([]message{{Role: string(llm.RoleAssistant), Parts: parts(content), FinishReason: finish}})))
}

// Capture is a streamed completion's text, kept up to the limit while it
// streams, when content capture is on; nil otherwise.
type Capture struct {
	b     strings.Builder
	limit int
}

// NewCapture returns a Capture when content capture is on, else nil.
func (t *Tracer) NewCapture() *Capture {
	if !t.capture {
		return nil
	}
	return &Capture{limit: t.limit}
}

// Add keeps what of s fits.
func (c *Capture) Add(s string) {
	if room := c.limit - c.b.Len(); room > 0 {
		c.b.WriteString(cut(s, room))
	}
}

// StreamedOutput records a streamed completion's captured text on sp.
func (t *Tracer) StreamedOutput(sp trace.Span, c *Capture, finish string) {
	if c == nil {
		return
	}
	t.OutputMessages(sp, []llm.Part{llm.TextPart(c.b.String())}, finish)
}

func parts(ps []llm.Part) []messagePart {
	out := make([]messagePart, 0, len(ps))
	for _, p := range ps {
		mp := messagePart{Type: string(p.Type)}
		switch p.Type {
		case llm.PartText, llm.PartReasoning:
			mp.Content = p.Text
		}
		out = append(out, mp)
	}
	return out
}

// bounded is ms as JSON, cut to the limit (then no longer valid JSON: a
// reader sees where it was cut by the marker at its end).
func (t *Tracer) bounded(ms []message) string {
	b, err := json.Marshal(ms)
	if err != nil {
		return ""
	}
	if len(b) <= t.limit {
		return string(b)
	}
	return cut(string(b), t.limit) + "…[truncated at " + strconv.Itoa(t.limit) + " bytes]"
}

// cut is s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
