package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/apd/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/classify"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/surface"
	"github.com/svcgw/svcgw/upstream"
)

// FinishCanceled is the finish reason recorded for a call whose caller went
// away before it ended; the call is still billed for what was generated.
const FinishCanceled = "canceled"

// call is one billable call on its way through the pipeline: a
// generation or an embeddings call (its kind).
type call struct {
	sf   surface.Codec
	kind kind
	// r is the call's request, with the call's span in its context when
	// traced; rec is its access record (nil outside the middleware).
	r   *http.Request
	rec *logRecord
	// caller is the caller's key, held by the request's logRecord
	// (withAuth) for as long as the call lasts.
	caller *store.Key
	// req is the decoded request. A stream drops it once the upstream
	// reply has begun (the conversation is not needed after that); what
	// metering needs is kept in model and input.
	req *llm.Request
	// embed is an embeddings call's request, and embedReply the encoder
	// of its reply (both nil for a generation).
	embed      *llm.EmbedRequest
	embedReply surface.EmbedReply
	model      string
	input      int // estimated prompt tokens
	reserveOut int // output tokens the reservation covers
	class      classify.Result
	id         string
	app        string
	start      time.Time // request received
	created    time.Time
	tpm        int64                // this instance's share of the key's tokens per minute; 0: unlimited
	accountTPM int64                // and of its account's; 0: none
	res        *billing.Reservation // released by meter, or by serve
	// set is the configuration the call started with: its router, prices
	// and limits, kept to its end whatever a reload does meanwhile.
	set *settings
	// stream is a stream's metering as it goes (relay): here rather than
	// in relay's frame, which is on the stack below every flush.
	stream meterInput
	// capture keeps a streamed completion for the call's span when
	// tracing captures content (trace.go); nil otherwise.
	capture *telemetry.Capture

	// What the call's access record reports, learnt on the way and
	// written to the record once, when the call ends (see record).
	report    upstream.Report // the router's account of the upstream attempts
	usage     llm.Usage       // metered
	cost      money.Micros
	metered   bool // the generation was recorded
	streamed  bool
	canceled  bool      // the caller left before the end
	firstByte time.Time // the first event ready for the caller, on the metrics' clock (time.Now)
}

// handleInference serves one billable endpoint of a surface, of either
// kind (kind.go): prepare (ledger check → rate limit → read → the kind's
// decode, bounds and classification → admit), serve (the kind's route
// and encoding → meter → settle), and the call's access record. A
// failure before the reply has begun is returned, for withAuth to write in
// the surface's envelope; a stream's later failures are events of the
// stream.
func (s *Server) handleInference(k kind) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller *store.Key) error {
		c, err := s.prepare(w, r, k, caller)
		if err == nil {
			err = s.serve(w, c.r, c)
		}
		c.finish(err)
		return err
	}
}

// finish writes what the call learnt to its request's access record (nil
// outside the middleware), the one place the pipeline fills it in, and on
// its span why it failed, if it did.
func (c *call) finish(err error) {
	rec := c.rec
	if rec == nil {
		return
	}
	if err != nil {
		rec.traceFailure(err)
	}
	rec.call, rec.surface = true, c.sf.Surface()
	rec.requestType, rec.app = c.class.Type, c.app
	rec.backend = c.report
	rec.canceled = c.canceled
	rec.firstByte = c.firstByte
	if c.metered {
		rec.metered, rec.streamed = true, c.streamed
		rec.usage, rec.cost = c.usage, c.cost
	}
}

// prepare checks, decodes, classifies and admits a call. It returns the
// call even when it fails, with what it learnt (the request type of a
// 402, say) for the access record; the call is on the heap, not in the
// frame of handleInference below every stream. It sets X-SVC-Request-Type
// as soon as the type is known, so even a 402 carries it.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, k kind, caller *store.Key) (*call, error) {
	sf := k.codec()
	c := &call{sf: sf, kind: k, caller: caller, set: s.current(), r: r, rec: recordFrom(r.Context())}
	if s.tracer != nil && c.rec != nil {
		c.r = s.traceCall(r, c.rec, sf, k.operation())
		r = c.r
	}
	// A call the ledger could not record would be free: while it cannot
	// (failing, stalled or backed up), no billable call is taken. The
	// store logs the incident; nothing is logged per call.
	if err := s.store.CheckLedger(); err != nil {
		return c, ledgerUnavailable(err)
	}
	// Requests per minute come next: a caller over its rate costs nothing
	// more than this check, not even reading its body.
	if err := s.takeRequest(caller, limitOr(caller.Limits.RPM, c.set.rpm), s.now()); err != nil {
		return c, err
	}
	c.start = s.now()
	body, err := s.readBody(r)
	if err != nil {
		return c, err
	}
	if err := k.decode(s, r, c, body); err != nil {
		return c, err
	}
	w.Header()["X-Svc-Request-Type"] = requestTypeHeader(c.class.Type) // X-SVC-Request-Type
	c.id = k.newID()
	c.app = application(r, caller)
	c.created = c.start
	c.tpm = s.share(limitOr(caller.Limits.TPM, c.set.tpm))
	c.accountTPM = s.share(accountLimit(caller.AccountTPM))
	if c.rec != nil && c.rec.span != nil {
		s.traceRequest(c.rec.span, c)
	}
	return c, s.admit(r.Context(), c)
}

// serve routes an admitted call upstream and answers it, the way its
// kind does. A call that fails before meter gives its reservation back;
// Release is idempotent.
//
// The kinds' serving is dispatched here, on what decode filled in,
// rather than through a method of kind: a stream's handler stack holds
// every frame below its flushes, and a method of kind between serve and
// serveStream is one more, which takes it past 8 KiB
// (TestStream_HandlerStackFitsEightKiB fails; see serveStream).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c *call) error {
	defer c.res.Release()
	switch {
	case c.embed != nil:
		return s.serveEmbed(w, r, c)
	case c.req.Stream:
		return s.serveStream(w, r, c)
	}
	return s.serveComplete(w, r, c)
}

// admit takes the call's estimated input from the key's tokens per minute
// and reserves its cost ceiling against the account's balance and the
// account's and key's spend caps. Traced, it is the call's admission
// span.
func (s *Server) admit(ctx context.Context, c *call) error {
	if s.tracer == nil || c.rec == nil || c.rec.span == nil {
		return s.admitCall(ctx, c)
	}
	ctx, sp := s.traceChild(ctx, telemetry.SpanAdmission)
	err := s.admitCall(ctx, c)
	traceChildEnd(sp, err)
	return err
}

// admitCall is admit's work.
func (s *Server) admitCall(ctx context.Context, c *call) error {
	input := c.input
	if err := s.admitTokens(c, input); err != nil {
		return err
	}
	claim := billing.Claim{
		AccountID:     c.caller.AccountID,
		KeyID:         c.caller.ID,
		KeyDailyCap:   capMicros(c.caller.Limits.DailyCap),
		KeyMonthlyCap: capMicros(c.caller.Limits.MonthlyCap),
		Amount:        c.set.prices.Ceiling(c.class.Type, c.class.Tier, c.req, input, c.reserveOut),
		Now:           c.start,
	}
	res, err := s.admission.Admit(ctx, claim)
	if err != nil {
		// A refused call used no tokens.
		s.spendTokens(c, -input, c.start)
		var le *llm.Error
		if errors.As(err, &le) {
			return le // a refusal
		}
		if errors.Is(err, store.ErrUnavailable) {
			s.log.Warn("admission: the database did not answer", "request_id", RequestID(ctx), "err", err)
			return databaseUnavailable(err)
		}
		if ctx.Err() != nil { // the caller left while its budget was read: no fault
			return &llm.Error{Kind: llm.KindUpstream, Message: "the request was canceled", Err: err}
		}
		s.log.Error("admission", "request_id", RequestID(ctx), "err", err)
		return &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: err}
	}
	c.res = res
	return nil
}

// unavailableRetryAfter is the Retry-After of the gateway's own 503s: long
// enough not to hammer a database that is recovering, short enough that
// the SDKs' own retries (which honour it up to a minute) may succeed.
const unavailableRetryAfter = 5 * time.Second

// ledgerUnavailable is the refusal of a billable call while the ledger
// cannot record it. It says nothing of the cause: that is the operator's.
func ledgerUnavailable(cause error) *llm.Error {
	return &llm.Error{Kind: llm.KindUnavailable, RetryAfter: unavailableRetryAfter, Err: cause,
		Message: "the gateway cannot record usage at the moment, so it is not taking billable calls; retry later"}
}

// databaseUnavailable is the answer to a call whose key, budget or spend
// could not be read in time.
func databaseUnavailable(cause error) *llm.Error {
	return &llm.Error{Kind: llm.KindUnavailable, RetryAfter: unavailableRetryAfter, Err: cause,
		Message: "the gateway's database is not answering at the moment; retry later"}
}

// share is this instance's share of a per-minute limit when several
// instances serve one PostgreSQL database: the limit divided among the
// instances seen in the last three heartbeats, rounded up (so that a
// limit of 1 stays usable). Each instance's buckets are its own, so the
// limit holds globally when the load balancer spreads a key's calls
// evenly; see the README for the tolerance.
func (s *Server) share(limit int64) int64 {
	n := int64(s.store.Instances())
	if n <= 1 || limit <= 0 {
		return limit
	}
	return (limit + n - 1) / n
}

// sharedLimit adds to a rate-limit refusal, when the limit was shared
// among several instances, that the figure it names is this instance's
// share of the subject's ("key", "account") limit.
func (s *Server) sharedLimit(err error, subject string, limit int64) error {
	var le *llm.Error
	n := s.store.Instances()
	if n <= 1 || !errors.As(err, &le) || le.Kind != llm.KindRateLimited {
		return err
	}
	shared := *le
	shared.Message += fmt.Sprintf(" (this gateway instance's share: the %s's limit of %d per minute is divided among the %d instances serving it)", subject, limit, n)
	return &shared
}

// limitOr is a key's own rate limit, or the server's default when it has
// none.
func limitOr(own *int64, def int64) int64 {
	if own != nil {
		return *own
	}
	return def
}

// capMicros is a key's spend cap in micro-dollars, or billing.NoCap. The
// store holds whole micro-dollars, so the conversion is exact; a cap it
// could not convert would be a corrupt row, and allows no spend rather
// than any (fail closed).
func capMicros(c *apd.Decimal) int64 {
	if c == nil {
		return billing.NoCap
	}
	n, err := money.FromDecimal(*c)
	if err != nil {
		return 0
	}
	return int64(n)
}

func (s *Server) serveComplete(w http.ResponseWriter, r *http.Request, c *call) error {
	upStart := s.now()
	resp, rep, err := c.set.router.Complete(r.Context(), c.class.Type, c.class.Tier, c.req)
	c.report = rep
	if err != nil {
		return s.upstreamError(r.Context(), err)
	}
	end := s.now()
	resp.ID = c.id
	resp.Model = c.model
	resp.Created = c.created
	s.sealResponse(resp)
	// Record before answering: a caller that reads the reply and asks
	// /generation at once must find the record (reads Sync the ledger).
	// svcgw's estimate of the output stands in only for an output count
	// the upstream left out (unreported): estimated then, not for every
	// reply (it reads every byte of the reply).
	delivered := 0
	if resp.Usage.OutputTokens <= 0 {
		for _, p := range resp.Content {
			delivered += llm.PartTokens(p)
		}
	}
	s.meter(r.Context(), c, meterInput{
		usage:        resp.Usage,
		delivered:    delivered,
		finish:       string(resp.FinishReason),
		streamed:     false,
		firstByte:    end,
		upstreamFrom: upStart,
		end:          end,
	})
	if rec := c.rec; rec != nil && rec.span != nil {
		s.traceOutput(rec.span, resp)
	}
	if err := c.sf.WriteResponse(w, c.req, resp); err != nil {
		s.log.Debug("write response", "request_id", RequestID(r.Context()), "err", err)
	}
	return nil
}

// serveStream serves a streamed call in three steps, the one streaming
// path every surface shares: open the upstream stream (here: a failure is
// still an error in the surface's envelope), relay its events (relay: the
// header, then each event through the surface's encoder, flushed frame by
// frame), and finish (meterFinish at the finish event, or endStream when
// none came). Usage accumulates as events pass; a caller that leaves
// cancels the upstream call (through the request context) and is billed
// for what was generated up to then, and a stream that fails or breaks off
// after delivering output is billed for what reached the caller, the same
// way.
//
// A stream's handler goroutine holds an 8 KiB stack for as long as it
// streams, which TestStream_HandlerStackFitsEightKiB holds it to; what
// that is worth, and what keeps it, is docs/architecture.md's "The stream
// stack".
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, c *call) error {
	upStart := s.now()
	st, rep, err := c.set.router.Stream(r.Context(), c.class.Type, c.class.Tier, c.req)
	c.report = rep
	if err != nil {
		return s.upstreamError(r.Context(), err)
	}
	defer st.Close()
	s.metrics.streamOpened()
	defer s.metrics.streamClosed()
	s.relay(w, r, c, st, upStart)
	return nil
}

// relay is a stream's second step (see serveStream): the response header,
// then the loop that relays each event to the caller, and the finish.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, c *call, st upstream.Stream, upStart time.Time) {
	ctx := r.Context()
	h := w.Header()
	h["Content-Type"] = eventStreamHeader
	h["Cache-Control"] = noCacheHeader
	h["X-Accel-Buffering"] = noHeader
	if _, ok := h["Date"]; !ok {
		h["Date"] = dateHeader(time.Now())
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := c.sf.NewStream(c.req, c.id, c.created)
	c.req = nil // the conversation: often most of what a call holds, for as long as it streams

	m := &c.stream
	*m = meterInput{streamed: true, upstreamFrom: upStart}
	var estimate int // output tokens seen so far, for calls that never finish
	// Frames are flushed when the stream has nothing more ready: a burst of
	// events (an upstream read holding several) goes out in one write, and
	// an event followed by a wait goes out at once. The router returns the
	// stream once its first event is in, so Start's frames leave with it.
	ready, _ := st.(interface{ Ready() bool })
	writeErr := enc.Start(w)
	for writeErr == nil && st.Next() {
		ev := st.Event()
		s.sealEvent(&ev)
		if m.firstByte.IsZero() {
			m.firstByte = s.now()
			c.firstByte = time.Now() // the metrics' clock: the access log's
		}
		switch ev.Type {
		case llm.EventTextDelta, llm.EventReasoningDelta, llm.EventToolCallDelta:
			estimate += llm.TextTokens(ev.Text)
			if c.capture != nil && ev.Type == llm.EventTextDelta {
				c.capture.Add(ev.Text)
			}
		case llm.EventFinish:
			s.meterFinish(ctx, c, m, &ev, estimate, enc)
		}
		if writeErr = enc.Event(w, ev); writeErr == nil && (ready == nil || !ready.Ready()) {
			writeErr = rc.Flush()
		}
	}
	if writeErr == nil {
		writeErr = rc.Flush() // whatever the last Ready held back
	}
	if m.finish != "" {
		return // metered at the finish event, even if the caller left during the last frames
	}
	s.endStream(ctx, w, c, st, enc, rc, m, estimate, writeErr)
}

// The relay's response headers, one shared slice each (as
// X-Svc-Request-Type's): net/http only reads them.
var (
	eventStreamHeader = []string{"text/event-stream"}
	noCacheHeader     = []string{"no-cache"}
	noHeader          = []string{"no"}
)

// dateHeader is the Date header net/http would write for a response at
// now (http.TimeFormat, to the second), made once a second and shared. A
// stream sets it itself because net/http formats it inside the frame that
// writes the header, 2.8 KB deep, where the formatting's own frames took
// a stream's handler stack past 8 KiB (see serveStream).
func dateHeader(now time.Time) []string {
	sec := now.Unix()
	if d := streamDate.Load(); d != nil && d.sec == sec {
		return d.value
	}
	d := &dateValue{sec: sec, value: []string{now.UTC().Format(http.TimeFormat)}}
	streamDate.Store(d)
	return d.value
}

type dateValue struct {
	sec   int64
	value []string
}

var streamDate atomic.Pointer[dateValue]

// meterFinish meters a stream at its finish event, before the final
// frames: a caller that reads the end of the stream and asks /generation
// at once must find the record (and a next turn, the items it names).
func (s *Server) meterFinish(ctx context.Context, c *call, m *meterInput, ev *llm.Event, estimate int, enc surface.Stream) {
	if ev.Usage != nil {
		m.usage = *ev.Usage
	}
	m.items = keptItems(enc) // complete at the finish event
	m.finish = string(ev.FinishReason)
	m.delivered = estimate
	m.end = s.now()
	s.meter(ctx, c, *m)
}

// endStream ends a stream that had no finish event: the caller left, the
// upstream failed mid-stream or broke off.
func (s *Server) endStream(ctx context.Context, w http.ResponseWriter, c *call, st upstream.Stream, enc surface.Stream, rc *http.ResponseController, m *meterInput, estimate int, writeErr error) {
	m.end = s.now()
	if m.firstByte.IsZero() {
		m.firstByte = m.end
	}
	streamErr := st.Err()
	// Without a finish event there is no reported usage: bill the
	// estimated input and the output that reached the caller.
	m.usage = llm.Usage{InputTokens: c.input, OutputTokens: estimate}
	switch {
	case writeErr != nil || ctx.Err() != nil:
		c.canceled = true
		m.finish = FinishCanceled
	default:
		// Failed mid-stream (or the backend ended without a finish event,
		// a broken stream): tell the caller in-band. A call that delivered
		// output is billed for it, as one the caller left would be; one
		// that delivered none is recorded at zero cost.
		e := &llm.Error{Kind: llm.KindUpstream, Message: "the upstream stream ended unexpectedly"}
		if streamErr != nil {
			e = s.upstreamError(ctx, streamErr)
		}
		c.rec.traceFailure(e)
		_ = enc.Error(w, e)
		_ = rc.Flush()
		m.finish = "error"
		if estimate == 0 {
			m.usage, m.failed = llm.Usage{}, true
		}
	}
	s.meter(ctx, c, *m)
}

// upstreamError makes any backend failure safe for callers: *llm.Error
// values pass (the router already rewrote vendor text); anything else, and a
// caller-side cancellation, become generic errors.
func (s *Server) upstreamError(ctx context.Context, err error) *llm.Error {
	if ctx.Err() != nil {
		return &llm.Error{Kind: llm.KindUpstream, Message: "the request was canceled", Err: err}
	}
	var e *llm.Error
	if errors.As(err, &e) {
		return e
	}
	s.log.Error("upstream", "request_id", RequestID(ctx), "err", err)
	return &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed", Err: err}
}

type meterInput struct {
	usage llm.Usage
	// delivered is svcgw's estimate of the output tokens that reached the
	// caller, which stands in for an output count the upstream did not
	// report.
	delivered    int
	finish       string
	streamed     bool
	failed       bool         // delivered nothing: recorded at zero cost
	items        []store.Item // the stream's output items to keep (items.go)
	upstreamFrom time.Time
	firstByte    time.Time
	end          time.Time
}

// meter prices a finished call and hands its generation record to the
// batched ledger writer, which debits the account in the same transaction.
// It runs even when the caller has gone (the record must survive it).
func (s *Server) meter(ctx context.Context, c *call, m meterInput) {
	if !m.failed {
		m.usage = s.unreported(ctx, c, m.usage, m.delivered)
	}
	var cost money.Micros // a failed call costs nothing
	if !m.failed {
		cost = c.set.prices.CostMicros(c.class.Type, c.class.Tier, m.usage)
	}
	c.usage, c.cost = m.usage, cost
	c.metered, c.streamed = true, m.streamed
	var ledger trace.Span // the ledger's span, when traced
	if rec := c.rec; rec != nil && rec.span != nil {
		s.traceMetered(rec.span, c, &m, int64(cost))
		_, ledger = s.traceChild(ctx, telemetry.SpanLedger)
	}
	// Settle in this order: the recorded generation makes the ledger count
	// the actual cost, and only then is the reservation released, so the
	// cost is never counted neither as spent nor as reserved.
	defer c.res.Release()
	s.spendTokens(c, m.usage.OutputTokens, s.now())
	s.store.RecordGeneration(store.Generation{
		ID:                  c.id,
		AccountID:           c.caller.AccountID,
		KeyID:               c.caller.ID,
		Application:         c.app,
		Surface:             string(c.sf.Surface()),
		Model:               c.model,
		RequestType:         string(c.class.Type),
		Tier:                string(c.class.Tier),
		Streamed:            m.streamed,
		FinishReason:        m.finish,
		PromptTokens:        m.usage.InputTokens,
		CompletionTokens:    m.usage.OutputTokens,
		CachedPromptTokens:  m.usage.CachedInputTokens,
		CacheCreationTokens: m.usage.CacheCreationTokens,
		ReasoningTokens:     m.usage.ReasoningTokens,
		Cost:                cost,
		LatencyMS:           m.firstByte.Sub(c.start).Milliseconds(),
		GenerationTimeMS:    m.end.Sub(m.upstreamFrom).Milliseconds(),
		CreatedAt:           c.created,
		Items:               m.items,
	})
	if ledger != nil {
		traceChildEnd(ledger, nil)
	}
}

// unreported fills in the counts an upstream left out of its usage with
// svcgw's own estimates, so that a missing count never makes a call free:
// a compatible server that ignores stream_options.include_usage, a stream
// whose usage never came, or a count the router's bounds set to zero
// because it was negative. Every real call has input, so no input is
// always a missing count; no output is one only when output reached the
// caller. The operator's log says so, naming the backend.
func (s *Server) unreported(ctx context.Context, c *call, u llm.Usage, delivered int) llm.Usage {
	in, out := u.InputTokens, u.OutputTokens
	if u.InputTokens <= 0 {
		u.InputTokens = c.input
	}
	if u.OutputTokens <= 0 && delivered > 0 {
		u.OutputTokens = delivered
	}
	// An embeddings reply without usage is the protocol's way, not a
	// fault: Gemini's embedContent and batchEmbedContents report none, nor
	// do some compatible servers. It is charged the same way, unlogged.
	if (u.InputTokens != in || u.OutputTokens != out) && c.embed == nil {
		s.log.Warn("upstream reported no usage for part of a call; charged svcgw's estimate",
			"request_id", RequestID(ctx), "backend", c.report.Candidate,
			"reported_input", in, "reported_output", out,
			"input", u.InputTokens, "output", u.OutputTokens)
	}
	return u
}

// application is the attribution label of a call: X-Title, else the host of
// the Referer, else the key's name; normalised by label.
func application(r *http.Request, caller *store.Key) string {
	if t := label(headerValue(r.Header, "X-Title")); t != "" {
		return t
	}
	if ref := headerValue(r.Header, "Referer"); ref != "" {
		if u, err := url.Parse(ref); err == nil && u.Host != "" {
			host := u.Host
			if h, _, err := net.SplitHostPort(u.Host); err == nil {
				host = h
			}
			if host = label(host); host != "" {
				return host
			}
		}
	}
	return caller.Name
}

// requestTypeHeaders are the X-SVC-Request-Type values, one shared slice per
// type (as X-Request-Id's): net/http only reads a header's values, and
// copies them when the response's header is written.
var requestTypeHeaders = func() map[llm.RequestType][]string {
	m := make(map[llm.RequestType][]string, len(llm.RequestTypes))
	for _, t := range llm.RequestTypes {
		m[t] = []string{string(t)}
	}
	return m
}()

// requestTypeHeader is the X-SVC-Request-Type value of t.
func requestTypeHeader(t llm.RequestType) []string {
	if v, ok := requestTypeHeaders[t]; ok {
		return v
	}
	return []string{string(t)}
}
