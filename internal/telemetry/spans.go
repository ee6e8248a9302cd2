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

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// The attributes, as the OpenTelemetry GenAI semantic conventions name
// them (gen_ai.*, error.type, http.*), and svcgw's own (svcgw.*).
const (
	attrOperation    = "gen_ai.operation.name"
	attrProvider     = "gen_ai.provider.name"
	attrRequestModel = "gen_ai.request.model"
	// attrEmbedDimensions is the GenAI conventions' name for an
	// embedding's length; attrEmbedInputs, how many inputs a call
	// embeds, is svcgw's.
	attrEmbedDimensions = "gen_ai.embeddings.dimension.count"
	attrEmbedInputs     = "svcgw.embeddings.inputs"
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

// key numbers svcgw's attributes (attr holds it); keyNames spells them.
type key uint8

const (
	kOperation key = iota
	kProvider
	kRequestModel
	kEmbedDimensions
	kEmbedInputs
	kMaxTokens
	kTemperature
	kTopP
	kResponseID
	kResponseModel
	kFinishReasons
	kInputTokens
	kOutputTokens
	kCacheRead
	kCacheWrite
	kInputMessages
	kOutputMessages
	kErrorType
	kStatusCode
	kMethod
	kRoute
	kRequestID
	kSurface
	kRequestType
	kTier
	kAccount
	kKeyID
	kApplication
	kCost
	kStreamed
	kTTFT
	kReasoning
	kRefusal
	kUpstream
	kProtocol
	kAttempt
	kRetry
	kFallback
	kBackoff
	kOutcome
	kBreaker
)

var keyNames = [...]string{
	kOperation:       attrOperation,
	kProvider:        attrProvider,
	kRequestModel:    attrRequestModel,
	kEmbedDimensions: attrEmbedDimensions,
	kEmbedInputs:     attrEmbedInputs,
	kMaxTokens:       attrMaxTokens,
	kTemperature:     attrTemperature,
	kTopP:            attrTopP,
	kResponseID:      attrResponseID,
	kResponseModel:   attrResponseModel,
	kFinishReasons:   attrFinishReasons,
	kInputTokens:     attrInputTokens,
	kOutputTokens:    attrOutputTokens,
	kCacheRead:       attrCacheRead,
	kCacheWrite:      attrCacheWrite,
	kInputMessages:   attrInputMessages,
	kOutputMessages:  attrOutputMessages,
	kErrorType:       attrErrorType,
	kStatusCode:      attrStatusCode,
	kMethod:          attrMethod,
	kRoute:           attrRoute,
	kRequestID:       attrRequestID,
	kSurface:         attrSurface,
	kRequestType:     attrRequestType,
	kTier:            attrTier,
	kAccount:         attrAccount,
	kKeyID:           attrKeyID,
	kApplication:     attrApplication,
	kCost:            attrCost,
	kStreamed:        attrStreamed,
	kTTFT:            attrTTFT,
	kReasoning:       attrReasoning,
	kRefusal:         attrRefusal,
	kUpstream:        attrUpstream,
	kProtocol:        attrProtocol,
	kAttempt:         attrAttempt,
	kRetry:           attrRetry,
	kFallback:        attrFallback,
	kBackoff:         attrBackoff,
	kOutcome:         attrOutcome,
	kBreaker:         attrBreaker,
}

// The gen_ai.operation.name values of the calls svcgw serves: a
// generation is chat on every surface (chat-completions, the Responses
// API, messages, generate-content), an embeddings call embeddings.
const (
	OperationChat       = string(upstream.OperationChat)
	OperationEmbeddings = string(upstream.OperationEmbeddings)
)

// StartCall starts the server span of an inference call of operation
// (OperationChat, OperationEmbeddings). A W3C
// traceparent in h makes it a child of the caller's span; without one it
// begins a trace. The sampler decides here, once for the call: its
// admission, attempts and ledger spans are sampled as it is. The span is
// named by its operation until Request names the model.
func (t *Tracer) StartCall(ctx context.Context, h http.Header, operation, surface, route, requestID string) (context.Context, trace.Span) {
	if len(h["Traceparent"]) > 0 { // what Extract reads first, without its canonicalizing the name
		ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	}
	psc := trace.SpanContextFromContext(ctx)
	tid := psc.TraceID()
	if !psc.IsValid() {
		tid = newTraceID()
	}
	res := t.sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: ctx, TraceID: tid, Name: operation, Kind: trace.SpanKindServer,
	})
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	s := newCallSpan()
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
		s.q = t.queue
		s.start = now()
	}
	s.sc = trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: newSpanID(), TraceFlags: flags, TraceState: res.Tracestate,
	})
	s.parent, s.remote = psc.SpanID(), psc.IsRemote()
	s.kind, s.name = trace.SpanKindServer, operation
	s.str(kOperation, operation)
	s.str(kSurface, surface)
	s.str(kMethod, http.MethodPost)
	s.str(kRoute, route)
	s.str(kRequestID, requestID)
	return trace.ContextWithSpan(ctx, s), s
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
	s := spanOf(sp)
	if s == nil || !s.IsRecording() {
		return
	}
	if c.Embed != nil {
		embedRequest(s, c)
		return
	}
	req := c.Request
	s.model = req.Model
	s.str(kRequestModel, req.Model)
	s.str(kRequestType, c.RequestType)
	s.str(kTier, c.Tier)
	s.str(kAccount, c.AccountID)
	s.str(kKeyID, c.KeyID)
	s.str(kApplication, c.App)
	s.bool(kStreamed, req.Stream)
	if req.MaxTokens > 0 {
		s.int(kMaxTokens, req.MaxTokens)
	}
	if req.Temperature != nil {
		s.float(kTemperature, *req.Temperature)
	}
	if req.TopP != nil {
		s.float(kTopP, *req.TopP)
	}
	if t.capture {
		s.str(kInputMessages, t.inputMessages(req))
	}
}

// embedRequest is Request for an embeddings call: the span is named
// "embeddings {model}", with the GenAI request attributes an embeddings
// call has (the model id, the dimensions asked for) and svcgw's. The
// inputs are never recorded, content capture or not: they are documents.
func embedRequest(s *span, c Call) {
	req := c.Embed
	s.model = req.Model
	s.str(kRequestModel, req.Model)
	s.str(kRequestType, c.RequestType)
	s.str(kTier, c.Tier)
	s.str(kAccount, c.AccountID)
	s.str(kKeyID, c.KeyID)
	s.str(kApplication, c.App)
	s.bool(kStreamed, false)
	s.int(kEmbedInputs, len(req.Inputs))
	if req.Dimensions > 0 {
		s.int(kEmbedDimensions, req.Dimensions)
	}
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
	s := spanOf(sp)
	if s == nil || !s.IsRecording() {
		return
	}
	s.str(kResponseID, r.ResponseID)
	s.int(kInputTokens, r.Usage.InputTokens)
	s.int(kOutputTokens, r.Usage.OutputTokens)
	s.int(kCacheRead, r.Usage.CachedInputTokens)
	s.finish = r.FinishReason
	s.float(kCost, float64(r.CostMicros)/1e6)
	s.float(kTTFT, float64(r.FirstToken.Microseconds())/1e3)
	// The rarer counts only when there are some.
	if r.Usage.CacheCreationTokens > 0 {
		s.int(kCacheWrite, r.Usage.CacheCreationTokens)
	}
	if r.Usage.ReasoningTokens > 0 {
		s.int(kReasoning, r.Usage.ReasoningTokens)
	}
}

// Failed records on sp why its call was refused or failed: the error's
// kind as error.type, and the caller's message (which never names a
// backend) as the refusal and the span's status description. The cause
// behind it, for the operator, is recorded as the span's exception.
func Failed(sp trace.Span, err error) {
	s := spanOf(sp)
	if s == nil || !s.IsRecording() {
		return
	}
	var le *llm.Error
	if !errors.As(err, &le) {
		s.put(attr{k: kErrorType, t: tString, s: string(llm.KindInternal)})
		s.SetStatus(codes.Error, "internal error")
		return
	}
	s.put(attr{k: kErrorType, t: tString, s: string(le.Kind)})
	s.put(attr{k: kRefusal, t: tString, s: le.Message})
	s.SetStatus(codes.Error, le.Message)
	if le.Err != nil {
		s.RecordError(le.Err)
	}
}

// EndCall ends the server span of a call answered with status.
func EndCall(sp trace.Span, status int) {
	if s := spanOf(sp); s != nil {
		s.put(attr{k: kStatusCode, t: tInt, n: uint64(status)})
	}
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
	return t.startChild(ctx, trace.SpanKindInternal, name)
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
	ctx, s := t.startChild(ctx, trace.SpanKindClient, string(op))
	s.model = c.Model
	s.str(kOperation, string(op))
	s.str(kProvider, provider(c.Protocol))
	s.str(kRequestModel, c.Model)
	s.str(kUpstream, c.Upstream)
	s.str(kProtocol, c.Protocol)
	s.int(kAttempt, n)
	s.bool(kRetry, retry)
	s.bool(kFallback, n > 0 && !retry)
	if c.TraceContext {
		ctx = upstream.WithTraceparent(ctx, traceparent(s.sc))
	}
	return ctx
}

// EndAttempt ends the attempt's span with its outcome: for a stream, at
// its first event (the rest of the stream is the call's). What is zero
// is left out: each attribute costs the export's encoding.
func (t *Tracer) EndAttempt(ctx context.Context, a *upstream.Attempt) {
	sp := trace.SpanFromContext(ctx)
	s := spanOf(sp)
	if s == nil {
		sp.End()
		return
	}
	s.str(kOutcome, string(a.Outcome))
	if a.Backoff > 0 {
		s.float(kBackoff, float64(a.Backoff.Microseconds())/1e3)
	}
	if a.BreakerOpen {
		s.bool(kBreaker, true)
	}
	if a.Outcome == upstream.OutcomeOK {
		// The model that answered: the router asks one model per
		// candidate, and vendors answer with the model asked for, give
		// or take a dated suffix the canonical reply does not keep.
		s.str(kResponseModel, s.model)
	} else if s.IsRecording() {
		s.str(kErrorType, string(a.Outcome))
		msg := string(a.Outcome)
		if a.Err != nil {
			msg = a.Err.Error() // names the backend: the operator's only
			s.RecordError(a.Err)
		}
		s.SetStatus(codes.Error, msg)
	}
	s.End()
}

var _ upstream.Tracer = (*Tracer)(nil)

// provider is gen_ai.provider.name for an upstream protocol.
func provider(protocol string) string {
	switch protocol {
	case "openai":
		return "openai"
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	case "fixture":
		return "svcgw.fixture" // not made per attempt
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
	if s := spanOf(sp); s != nil && s.IsRecording() {
		s.put(attr{k: kOutputMessages, t: tString, s: t.bounded([]message{{Role: string(llm.RoleAssistant), Parts: parts(content), FinishReason: finish}})})
	}
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
