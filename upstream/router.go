package upstream

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Candidate is one backend that can serve a route.
type Candidate struct {
	// Name identifies the candidate in operator logs; callers never see it.
	Name    string
	Backend Backend
	// Limits are the backend model's limits. When zero and the backend
	// reports its own (as the fixture does), NewRouter and Set fill them in.
	Limits Limits
	// Group makes adjacent candidates equals: among a run of candidates
	// with the same non-empty Group, each call picks one by its cacheable
	// prefix (cache affinity), and the others follow as fallbacks.
	Group string

	// For the operator's traces (Tracer): the upstream's name, its
	// protocol and the backend model, and whether requests to it may carry
	// a W3C traceparent (off unless configured: it reaches a third party).
	Upstream, Protocol, Model string
	TraceContext              bool
}

// route is a key of the routing table.
type route struct {
	t    llm.RequestType
	tier llm.Tier
}

// Router maps a request type and effort tier to an ordered list of
// candidates and sends each call to them.
//
// Each call walks the route's candidates in order. A candidate that fails
// before producing anything (Complete returned an error, or Stream returned
// one or its stream failed before its first event) with a transient error —
// a connection error, 429, 5xx, overloaded, a timeout — is retried after a
// jittered exponential backoff (honouring the upstream's Retry-After when it
// is short), up to the retry budget, and then the next candidate is tried.
// Once a stream has produced an event the call is committed to that backend,
// and a later failure reaches the caller through Stream.Err. A failure that
// is the caller's fault (invalid_request, too_large) is returned at once,
// since every backend would refuse the same request.
//
// Circuit breaker: a candidate that fails BreakerThreshold calls in a row is
// skipped for BreakerCooldown; then one call at a time probes it (half
// open), and a success closes the breaker. When every candidate of a route
// is open, the route still tries them in order rather than failing without
// a try.
//
// Cache affinity: among equal candidates (adjacent, same Group), a call goes
// to the one chosen by rendezvous hashing of its account, its cache key and
// its cacheable prefix (tools, system prompt and messages up to the last
// cache breakpoint, or the system prompt and first message without one), so
// calls of one account that share a prefix land
// on the same backend and its prompt cache, without session pinning; the
// choice only moves when that candidate is open.
//
// Usage: every reply's usage is bounded by what the call could have used
// (output at its max_tokens or the model's limit, input at svcgw's own
// count of the prompt with a margin, never above the context length; see
// boundsFor), with a WARN naming the candidate when an upstream reported
// more.
//
// Errors: *llm.Error values from backends pass through unchanged (backends
// write caller-safe messages); a cancelled or expired caller context comes
// back as ctx.Err() itself, so the server can tell a caller that left; any
// other error becomes an upstream error (or timeout, for a backend's own
// deadline) with a generic message that never names the backend, keeping
// the original as the cause for logs.
//
// Report: Complete and Stream also return what they did, for the operator:
// every attempt with its candidate, outcome, duration, backoff and the
// candidate's breaker state, and the candidate that served the call.
//
// A Router is safe for concurrent use, Set included.
type Router struct {
	mu     sync.RWMutex
	def    []Candidate
	routes map[route][]Candidate
	opts   RouterOptions
	health sync.Map // candidate Name → *health
}

// RouterOptions tune retries and the circuit breaker. Zero fields take the
// defaults in parentheses.
type RouterOptions struct {
	MaxRetries       int           // retries of one candidate before the next (2); negative: none
	BaseBackoff      time.Duration // first backoff, doubled per retry, ±50% jitter (100ms)
	MaxBackoff       time.Duration // backoff cap; a longer Retry-After moves on instead (2s)
	BreakerThreshold int           // consecutive failures that open a candidate's breaker (5)
	BreakerCooldown  time.Duration // how long an open breaker skips its candidate (30s)
	Logger           *slog.Logger  // operator log of retries and breaker changes (discard)
	// Tracer, when set, is told of every attempt (nil: none).
	Tracer Tracer
	// Now and Sleep are the clock, for tests (time.Now; a timer honouring ctx).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

func (o RouterOptions) withDefaults() RouterOptions {
	if o.MaxRetries == 0 {
		o.MaxRetries = 2
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Second
	}
	if o.BreakerThreshold <= 0 {
		o.BreakerThreshold = 5
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewRouter returns a router whose every route is served by def until Set
// gives it candidates of its own, with default RouterOptions. Here and in
// Set, candidates without a Backend are left out.
func NewRouter(def []Candidate) *Router {
	return NewRouterWithOptions(RouterOptions{}, def)
}

// NewRouterWithOptions is NewRouter with retry and breaker options.
func NewRouterWithOptions(opts RouterOptions, def []Candidate) *Router {
	return &Router{def: withLimits(def), routes: make(map[route][]Candidate), opts: opts.withDefaults()}
}

// Set sets the candidates of one route, in the order they are tried. An
// empty list makes the route fall back to the default candidates again.
func (r *Router) Set(t llm.RequestType, tier llm.Tier, cands []Candidate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(cands) == 0 {
		delete(r.routes, route{t, tier})
		return
	}
	r.routes[route{t, tier}] = withLimits(cands)
}

// Candidates returns a copy of the candidates of a route, in order.
func (r *Router) Candidates(t llm.RequestType, tier llm.Tier) []Candidate {
	return append([]Candidate(nil), r.candidates(t, tier)...)
}

// candidates returns the route's own slice; callers must not modify it.
func (r *Router) candidates(t llm.RequestType, tier llm.Tier) []Candidate {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if c, ok := r.routes[route{t, tier}]; ok {
		return c
	}
	return r.def
}

// Limits returns what the models endpoint reports: the smallest
// ContextLength and the smallest MaxCompletionTokens over every configured
// candidate, the defaults included, so a caller that stays within them fits
// whichever route its calls are classified into. Zero (unknown) limits are
// ignored; a field is zero only when no candidate knows it.
func (r *Router) Limits() Limits {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var l Limits
	fold := func(cs []Candidate) {
		for _, c := range cs {
			l.ContextLength = minKnown(l.ContextLength, c.Limits.ContextLength)
			l.MaxCompletionTokens = minKnown(l.MaxCompletionTokens, c.Limits.MaxCompletionTokens)
		}
	}
	fold(r.def)
	for _, cs := range r.routes {
		fold(cs)
	}
	return l
}

// minKnown is the smaller of two limits, where zero means unknown.
func minKnown(a, b int) int {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// Complete sends req to the route's candidates (see Router) until one
// answers. The report says what was tried, failed or not.
func (r *Router) Complete(ctx context.Context, t llm.RequestType, tier llm.Tier, req *llm.Request) (*llm.Response, Report, error) {
	var resp *llm.Response
	rep, err := r.try(ctx, t, tier, req, func(ctx context.Context, c Candidate) error {
		var err error
		resp, err = c.Backend.Complete(ctx, req)
		if err == nil && resp != nil {
			resp.Usage = checkUsage(r.opts.Logger, c.Name, boundsFor(req, c.Limits), resp.Usage)
		}
		return err
	})
	return resp, rep, err
}

// Stream sends req to the route's candidates (see Router) until one starts
// a stream. It returns once that stream has produced its first event (or
// ended), so that a failure before any output can still be retried or fall
// back and the caller can still choose an HTTP status. The report says what
// was tried up to then, failed or not: once a stream has begun, the call is
// committed to its candidate and makes no more attempts.
func (r *Router) Stream(ctx context.Context, t llm.RequestType, tier llm.Tier, req *llm.Request) (Stream, Report, error) {
	var out Stream
	rep, err := r.try(ctx, t, tier, req, func(ctx context.Context, c Candidate) error {
		s, err := c.Backend.Stream(ctx, req)
		if err != nil {
			return err
		}
		rs := &routedStream{ctx: ctx, s: s, log: r.opts.Logger, name: c.Name, bounds: boundsFor(req, c.Limits)}
		if s.Next() {
			rs.cur, rs.pending = rs.bound(s.Event()), true
			out = rs
			return nil
		}
		if err := s.Err(); err != nil {
			s.Close()
			return err
		}
		// Ended cleanly without an event: nothing to retry.
		out = rs
		return nil
	})
	return out, rep, err
}

// try runs attempt against the route's candidates with retries, backoff,
// fallback and the circuit breaker; it returns nil after the first success,
// and reports every attempt either way. Each attempt runs with ctx, or
// with the context the Tracer gave it.
func (r *Router) try(ctx context.Context, t llm.RequestType, tier llm.Tier, req *llm.Request, attempt func(context.Context, Candidate) error) (Report, error) {
	return r.tryEach(ctx, OperationChat, r.order(r.candidates(t, tier), func() uint64 { return affinityKey(req) }), attempt)
}

// tryEach is try over candidates already in order, each attempt an op.
func (r *Router) tryEach(ctx context.Context, op Operation, cands []Candidate, attempt func(context.Context, Candidate) error) (Report, error) {
	var rep Report
	if len(cands) == 0 {
		return rep, errNoCandidates()
	}
	o := &r.opts
	var err error
	for _, c := range cands {
		h := r.healthOf(c.Name)
		var wait time.Duration // before this attempt
		for retry := 0; ; retry++ {
			actx := ctx
			if o.Tracer != nil {
				// A copy, so that c itself stays on the stack (the
				// tracer's pointer would move it to the heap, traced or not).
				cc := c
				actx = startAttempt(o.Tracer, ctx, &cc, len(rep.Attempts), retry > 0, op)
			}
			start := o.Now()
			err = attempt(actx, c)
			a := Attempt{Candidate: c.Name, Retry: retry > 0, Backoff: wait, Duration: o.Now().Sub(start)}
			if err == nil {
				h.success(o, c.Name)
				a.Outcome = OutcomeOK
				rep.Candidate, rep.Attempts = c.Name, append(rep.Attempts, a)
				if o.Tracer != nil {
					ac := a // a copy, as cc
					endAttempt(o.Tracer, actx, &ac)
				}
				return rep, nil
			}
			if ctx.Err() != nil || !fallBack(ctx, err) {
				safe := backendError(ctx, err)
				a = a.failed(err, safe, h.open(o.Now()))
				rep.Attempts = append(rep.Attempts, a)
				if o.Tracer != nil {
					ac := a // a copy, as cc
					endAttempt(o.Tracer, actx, &ac)
				}
				return rep, safe
			}
			h.failure(o, c.Name)
			open := h.open(o.Now())
			a = a.failed(err, backendError(ctx, err), open)
			rep.Attempts = append(rep.Attempts, a)
			if o.Tracer != nil {
				ac := a // a copy, as cc
				endAttempt(o.Tracer, actx, &ac)
			}
			// Retry the same candidate only when waiting may help (not for
			// rejected credentials, exhausted quota or a 4xx); fall back
			// to the next candidate either way.
			if !Retryable(err) || retry >= o.MaxRetries || open {
				break
			}
			wait = backoff(*o, retry)
			var e *llm.Error
			if errors.As(err, &e) && e.RetryAfter > 0 {
				if e.RetryAfter > o.MaxBackoff {
					break // too long to hold the caller: try the next candidate
				}
				wait = e.RetryAfter
			}
			logRetry(o.Logger, c.Name, retry+1, wait, err)
			if serr := o.Sleep(ctx, wait); serr != nil {
				return rep, backendError(ctx, serr)
			}
		}
		logFallback(o.Logger, c.Name, err)
	}
	return rep, backendError(ctx, err)
}

// logRetry and logFallback are try's log lines.
func logRetry(l *slog.Logger, name string, retry int, wait time.Duration, err error) {
	l.Warn("upstream retry", "candidate", name, "retry", retry, "wait", wait.String(), "err", err)
}

func logFallback(l *slog.Logger, name string, err error) {
	l.Warn("upstream fallback", "candidate", name, "err", err)
}

// backoff is the jittered exponential wait before retry n (0-based):
// BaseBackoff·2ⁿ, capped at MaxBackoff, scaled by a random 50–150%.
func backoff(o RouterOptions, n int) time.Duration {
	d := o.BaseBackoff << min(n, 16)
	if d > o.MaxBackoff || d <= 0 {
		d = o.MaxBackoff
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// order returns the candidates in the order this call tries them: closed
// breakers first (open ones keep their relative order at the end, so a
// route whose every candidate is open still tries them), and within each
// group of equals, the one that owns the call's affinity key first
// (computed only for such a group).
func (r *Router) order(cands []Candidate, affinity func() uint64) []Candidate {
	if len(cands) <= 1 {
		return cands
	}
	out := make([]Candidate, 0, len(cands))
	var key uint64
	keyed := false
	for i := 0; i < len(cands); {
		j := i + 1
		for cands[i].Group != "" && j < len(cands) && cands[j].Group == cands[i].Group {
			j++
		}
		group := cands[i:j]
		if len(group) > 1 {
			if !keyed {
				key, keyed = affinity(), true
			}
			group = byAffinity(group, key)
		}
		out = append(out, group...)
		i = j
	}
	now := r.opts.Now()
	closed := out[:0:0]
	var open []Candidate
	for _, c := range out {
		if r.healthOf(c.Name).skip(now) {
			open = append(open, c)
		} else {
			closed = append(closed, c)
		}
	}
	return append(closed, open...)
}

// byAffinity orders a group by rendezvous hashing of key: every call with
// the same key prefers the same member, and removing one member moves only
// the keys it owned.
func byAffinity(group []Candidate, key uint64) []Candidate {
	type scored struct {
		c     Candidate
		score uint64
	}
	ss := make([]scored, len(group))
	for i, c := range group {
		h := fnv.New64a()
		h.Write([]byte(c.Name))
		ss[i] = scored{c, mix(h.Sum64() ^ key)}
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].score > ss[j].score })
	out := make([]Candidate, len(ss))
	for i, s := range ss {
		out[i] = s.c
	}
	return out
}

// mix is a 64-bit finalizer (splitmix64), so nearby inputs score apart.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// affinityKey hashes a call's cacheable prefix: tools, system prompt and
// messages up to and including the last cache breakpoint; without one, the
// tools, system prompt and first message — the part every turn of a
// conversation shares.
func affinityKey(req *llm.Request) uint64 {
	h := fnv.New64a()
	// Scoped to the account (and the caller's own cache key): cache
	// affinity never lands one tenant's calls on another's cache.
	h.Write([]byte(req.Account))
	h.Write([]byte{0})
	h.Write([]byte(req.CacheKey))
	h.Write([]byte{0})
	var parts []llm.Part
	for _, t := range req.Tools {
		h.Write([]byte(t.Name))
		h.Write(t.Parameters)
	}
	parts = append(parts, req.System...)
	last := -1
	msgEnd := make([]int, 0, len(req.Messages))
	for _, m := range req.Messages {
		parts = append(parts, m.Parts...)
		msgEnd = append(msgEnd, len(parts))
	}
	for i, p := range parts {
		if p.CacheControl != nil {
			last = i
		}
	}
	end := last + 1
	if last < 0 {
		end = len(req.System)
		if len(msgEnd) > 0 {
			end = msgEnd[0]
		}
	}
	for _, p := range parts[:end] {
		h.Write([]byte(p.Type))
		h.Write([]byte(p.Text))
		h.Write(p.Data)
		h.Write([]byte(p.URL))
		if p.ToolCall != nil {
			h.Write([]byte(p.ToolCall.Name))
			h.Write(p.ToolCall.Arguments)
		}
	}
	return h.Sum64()
}

// health is one candidate's circuit breaker.
type health struct {
	mu        sync.Mutex
	failures  int       // consecutive
	openUntil time.Time // zero: closed
}

// probeWindow is how long a half-open breaker gives one call to probe its
// candidate before letting another call try.
const probeWindow = 5 * time.Second

func (r *Router) healthOf(name string) *health {
	if h, ok := r.health.Load(name); ok {
		return h.(*health)
	}
	h, _ := r.health.LoadOrStore(name, &health{})
	return h.(*health)
}

// skip reports whether the breaker keeps calls away now. Past the cooldown
// it lets one call through (half open) and keeps the others away for
// probeWindow, long enough for that call to succeed (closing the breaker)
// or fail (opening it again).
func (h *health) skip(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.openUntil.IsZero() {
		return false
	}
	if now.Before(h.openUntil) {
		return true
	}
	h.openUntil = now.Add(probeWindow)
	return false
}

// open reports whether the breaker is open (retrying is pointless).
func (h *health) open(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.openUntil.IsZero() && now.Before(h.openUntil)
}

func (h *health) success(o *RouterOptions, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.openUntil.IsZero() {
		o.Logger.Info("upstream breaker closed", "candidate", name)
	}
	h.failures, h.openUntil = 0, time.Time{}
}

func (h *health) failure(o *RouterOptions, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	if h.failures >= o.BreakerThreshold {
		if h.openUntil.IsZero() || !o.Now().Before(h.openUntil) {
			o.Logger.Warn("upstream breaker open", "candidate", name, "failures", h.failures, "cooldown", o.BreakerCooldown.String())
		}
		h.openUntil = o.Now().Add(o.BreakerCooldown)
	}
}

// errNoCandidates answers a route with no backend: a configuration bug.
func errNoCandidates() error {
	return &llm.Error{Kind: llm.KindInternal, Message: "no backend is configured for this request"}
}

// fallBack reports whether a failed call should go to the next candidate.
func fallBack(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var e *llm.Error
	if errors.As(err, &e) {
		switch e.Kind {
		case llm.KindInvalidRequest, llm.KindTooLarge:
			return false
		}
	}
	return true
}

// backendError makes a backend's error safe to return (see Router).
func backendError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxErr
	}
	var e *llm.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &llm.Error{Kind: llm.KindTimeout, Message: "the upstream model timed out", Err: err}
	}
	return &llm.Error{Kind: llm.KindUpstream, Message: msgFailed, Err: err}
}

// routedStream is a backend stream whose first event the router has already
// read, whose errors it makes safe and whose usage it bounds.
type routedStream struct {
	ctx     context.Context
	s       Stream
	cur     llm.Event
	pending bool // cur is the first event and Next has not yet returned it

	log    *slog.Logger
	name   string      // the candidate, for the operator's log
	bounds usageBounds // computed at the start: the request is let go of
}

func (s *routedStream) Next() bool {
	if s.pending {
		s.pending = false
		return true
	}
	if !s.s.Next() {
		return false
	}
	s.cur = s.bound(s.s.Event())
	return true
}

// bound bounds the usage of a finish event (see checkUsage).
func (s *routedStream) bound(ev llm.Event) llm.Event {
	if ev.Type == llm.EventFinish && ev.Usage != nil {
		if u := checkUsage(s.log, s.name, s.bounds, *ev.Usage); u != *ev.Usage {
			p := new(llm.Usage) // only then: a stream's finish stays allocation-free
			*p = u
			ev.Usage = p
		}
	}
	return ev
}

func (s *routedStream) Event() llm.Event { return s.cur }

// Ready reports whether Next can return without waiting (see Stream).
func (s *routedStream) Ready() bool {
	if s.pending {
		return true
	}
	r, ok := s.s.(interface{ Ready() bool })
	return ok && r.Ready()
}

func (s *routedStream) Err() error { return backendError(s.ctx, s.s.Err()) }

func (s *routedStream) Close() error { return s.s.Close() }

// withLimits copies cands without the ones that have no backend, filling in
// zero Limits from backends that report their own.
func withLimits(cands []Candidate) []Candidate {
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if c.Backend == nil {
			continue
		}
		if lb, ok := c.Backend.(interface{ Limits() Limits }); ok && c.Limits == (Limits{}) {
			c.Limits = lb.Limits()
		}
		out = append(out, c)
	}
	return out
}
