package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/classify"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// FinishCanceled is the finish reason recorded for a call whose caller went
// away before it ended; the call is still billed for what was generated.
const FinishCanceled = "canceled"

// call is one inference call on its way through the pipeline.
type call struct {
	sf      surface
	caller  store.Key
	req     *llm.Request
	class   classify.Result
	id      string
	app     string
	start   time.Time // request received
	created time.Time
}

// handleInference serves one inference endpoint of a surface: decode →
// classify → admit → route → encode → meter.
func (s *Server) handleInference(sf surface) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller store.Key) {
		c, err := s.prepare(w, r, sf, caller)
		if err != nil {
			sf.writeError(w, err)
			return
		}
		if c.req.Stream {
			s.serveStream(w, r, c)
			return
		}
		s.serveComplete(w, r, c)
	}
}

// prepare decodes, classifies and admits a call. It sets X-SVC-Request-Type
// as soon as the type is known, so even a 402 carries it.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, sf surface, caller store.Key) (*call, error) {
	start := s.now()
	rec := recordFrom(r.Context())
	rec.surface = sf.name
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	req, err := sf.decode(r, body)
	if err != nil {
		return nil, err
	}
	effort, err := classify.ParseEffort(r.Header.Get("X-SVC-Effort"))
	if err != nil {
		return nil, err
	}
	class := classify.Classify(classify.Input{Request: req, Surface: sf.name, Effort: effort})
	rec.requestType = class.Type
	w.Header().Set("X-SVC-Request-Type", string(class.Type))
	if err := s.admit(r.Context(), caller); err != nil {
		return nil, err
	}
	return &call{
		sf:      sf,
		caller:  caller,
		req:     req,
		class:   class,
		id:      sf.newID(),
		app:     application(r, caller),
		start:   start,
		created: start,
	}, nil
}

// admit refuses a call when the caller's account has nothing left to spend.
func (s *Server) admit(ctx context.Context, caller store.Key) error {
	acct, err := s.store.AccountByID(ctx, caller.AccountID)
	if err != nil {
		return fmt.Errorf("load account: %w", err)
	}
	if acct.Balance.Sign() <= 0 {
		return &llm.Error{Kind: llm.KindPaymentRequired,
			Message: "insufficient credits: the account balance is " + billing.Format(acct.Balance) + " USD; add credits to continue"}
	}
	return nil
}

func (s *Server) serveComplete(w http.ResponseWriter, r *http.Request, c *call) {
	upStart := s.now()
	resp, err := s.router.Complete(r.Context(), c.class.Type, c.class.Tier, c.req)
	if err != nil {
		c.sf.writeError(w, s.upstreamError(r.Context(), err))
		return
	}
	end := s.now()
	resp.ID = c.id
	resp.Model = c.req.Model
	resp.Created = c.created
	if err := c.sf.writeResponse(w, c.req, resp); err != nil {
		s.log.Debug("write response", "request_id", RequestID(r.Context()), "err", err)
	}
	s.meter(r.Context(), c, meterInput{
		usage:        resp.Usage,
		finish:       string(resp.FinishReason),
		streamed:     false,
		firstByte:    end,
		upstreamFrom: upStart,
		end:          end,
	})
}

// serveStream runs the one streaming loop every surface shares: headers,
// then each event through the surface's encoder, flushed frame by frame.
// Usage accumulates as events pass; a caller that leaves cancels the
// upstream call (through the request context) and is billed for what was
// generated up to then.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, c *call) {
	ctx := r.Context()
	upStart := s.now()
	st, err := s.router.Stream(ctx, c.class.Type, c.class.Tier, c.req)
	if err != nil {
		c.sf.writeError(w, s.upstreamError(ctx, err))
		return
	}
	defer st.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := c.sf.newStream(c.req, c.id, c.created)

	m := meterInput{streamed: true, upstreamFrom: upStart}
	var estimate int // output tokens seen so far, for calls that never finish
	writeErr := enc.Start(w)
	if writeErr == nil {
		writeErr = rc.Flush()
	}
	for writeErr == nil && st.Next() {
		ev := st.Event()
		if m.firstByte.IsZero() {
			m.firstByte = s.now()
		}
		switch ev.Type {
		case llm.EventTextDelta, llm.EventReasoningDelta, llm.EventToolCallDelta:
			estimate += llm.TextTokens(ev.Text)
		case llm.EventFinish:
			if ev.Usage != nil {
				m.usage = *ev.Usage
			}
			m.finish = string(ev.FinishReason)
		}
		if writeErr = enc.Event(w, ev); writeErr == nil {
			writeErr = rc.Flush()
		}
	}
	m.end = s.now()
	if m.firstByte.IsZero() {
		m.firstByte = m.end
	}
	streamErr := st.Err()
	switch {
	case m.finish != "":
		// Complete, even if the caller left during the last frames.
	case writeErr != nil || ctx.Err() != nil:
		recordFrom(ctx).canceled = true
		m.finish = FinishCanceled
		m.usage = llm.Usage{InputTokens: c.req.InputTokens(), OutputTokens: estimate}
	case streamErr != nil:
		// Failed mid-stream: tell the caller in-band. Nothing is billed
		// for a call that failed, but it is still recorded at zero cost.
		e := s.upstreamError(ctx, streamErr)
		_ = enc.Error(w, e)
		_ = rc.Flush()
		m.finish = "error"
		m.failed = true
	default:
		// The backend ended without a finish event: a broken stream.
		_ = enc.Error(w, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream stream ended unexpectedly"})
		_ = rc.Flush()
		m.finish = "error"
		m.failed = true
	}
	s.meter(ctx, c, m)
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
	usage        llm.Usage
	finish       string
	streamed     bool
	failed       bool
	upstreamFrom time.Time
	firstByte    time.Time
	end          time.Time
}

// meter prices a finished call and hands its generation record to the
// batched ledger writer, which debits the account in the same transaction.
// It runs even when the caller has gone (the record must survive it).
func (s *Server) meter(ctx context.Context, c *call, m meterInput) {
	cost := apd.Decimal{}
	if !m.failed {
		cost = s.prices.Cost(c.class.Type, c.class.Tier, m.usage)
	}
	rec := recordFrom(ctx)
	rec.usage = m.usage
	rec.cost = billing.Format(cost)
	s.store.RecordGeneration(store.Generation{
		ID:                  c.id,
		AccountID:           c.caller.AccountID,
		KeyID:               c.caller.ID,
		Application:         c.app,
		Surface:             string(c.sf.name),
		Model:               c.req.Model,
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
	})
}

// application is the attribution label of a call: X-Title, else the host of
// the Referer, else the key's name.
func application(r *http.Request, caller store.Key) string {
	if t := strings.TrimSpace(r.Header.Get("X-Title")); t != "" {
		return t
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		if u, err := url.Parse(ref); err == nil && u.Host != "" {
			if host, _, err := net.SplitHostPort(u.Host); err == nil {
				return host
			}
			return u.Host
		}
	}
	return caller.Name
}
