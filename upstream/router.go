package upstream

import (
	"context"
	"errors"
	"sync"

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
}

// route is a key of the routing table.
type route struct {
	t    llm.RequestType
	tier llm.Tier
}

// Router maps a request type and effort tier to an ordered list of
// candidates and sends each call to them.
//
// Fallback, for now: candidates are tried in order, and the next one only
// when the current one fails before producing anything: Complete returned an
// error, or Stream returned one or its stream failed before its first event.
// Once a stream has produced an event the call is committed to that backend,
// and a later failure reaches the caller through Stream.Err. A failure that
// is the caller's fault (invalid_request, too_large) is returned at once,
// since every backend would refuse the same request. Retries of the same
// candidate, timeouts and cache affinity come later.
//
// Errors: *llm.Error values from backends pass through unchanged (backends
// write caller-safe messages); a cancelled or expired caller context comes
// back as ctx.Err() itself, so the server can tell a caller that left; any
// other error becomes an upstream error (or timeout, for a backend's own
// deadline) with a generic message that never names the backend, keeping
// the original as the cause for logs.
//
// A Router is safe for concurrent use, Set included.
type Router struct {
	mu     sync.RWMutex
	def    []Candidate
	routes map[route][]Candidate
}

// NewRouter returns a router whose every route is served by def until Set
// gives it candidates of its own. Here and in Set, candidates without a
// Backend are left out.
func NewRouter(def []Candidate) *Router {
	return &Router{def: withLimits(def), routes: make(map[route][]Candidate)}
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

// Complete sends req to the route's candidates in order until one answers.
func (r *Router) Complete(ctx context.Context, t llm.RequestType, tier llm.Tier, req *llm.Request) (*llm.Response, error) {
	cands := r.candidates(t, tier)
	if len(cands) == 0 {
		return nil, errNoCandidates()
	}
	var err error
	for _, c := range cands {
		var resp *llm.Response
		resp, err = c.Backend.Complete(ctx, req)
		if err == nil {
			return resp, nil
		}
		if !fallBack(ctx, err) {
			break
		}
	}
	return nil, backendError(ctx, err)
}

// Stream sends req to the route's candidates in order until one starts a
// stream. It returns once that stream has produced its first event (or
// ended), so that a failure before any output can still fall back and the
// caller can still choose an HTTP status.
func (r *Router) Stream(ctx context.Context, t llm.RequestType, tier llm.Tier, req *llm.Request) (Stream, error) {
	cands := r.candidates(t, tier)
	if len(cands) == 0 {
		return nil, errNoCandidates()
	}
	var err error
	for _, c := range cands {
		var s Stream
		s, err = c.Backend.Stream(ctx, req)
		if err == nil {
			if s.Next() {
				return &routedStream{ctx: ctx, s: s, cur: s.Event(), pending: true}, nil
			}
			if err = s.Err(); err == nil {
				// Ended cleanly without an event: nothing to fall back from.
				return &routedStream{ctx: ctx, s: s}, nil
			}
			s.Close()
		}
		if !fallBack(ctx, err) {
			break
		}
	}
	return nil, backendError(ctx, err)
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
	return &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed", Err: err}
}

// routedStream is a backend stream whose first event the router has already
// read, and whose errors it makes safe.
type routedStream struct {
	ctx     context.Context
	s       Stream
	cur     llm.Event
	pending bool // cur is the first event and Next has not yet returned it
}

func (s *routedStream) Next() bool {
	if s.pending {
		s.pending = false
		return true
	}
	if !s.s.Next() {
		return false
	}
	s.cur = s.s.Event()
	return true
}

func (s *routedStream) Event() llm.Event { return s.cur }

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
