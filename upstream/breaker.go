package upstream

import (
	"sort"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Breaker is one candidate's circuit breaker as the operator sees it (the
// admin listener's metrics and readiness). It names a backend: never show
// it to a caller.
type Breaker struct {
	Candidate string // Candidate.Name
	// Open is set while calls skip the candidate, until Until.
	Open  bool
	Until time.Time // zero when closed
	// Failures counts the candidate's failed calls in a row.
	Failures int
}

// Breakers reports the breaker of every candidate the router knows, each
// once, sorted by name; candidates never called yet are closed.
func (r *Router) Breakers() []Breaker {
	now := r.opts.Now()
	seen := map[string]bool{}
	var out []Breaker
	add := func(cs []Candidate) {
		for _, c := range cs {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			out = append(out, r.breaker(c.Name, now))
		}
	}
	r.mu.RLock()
	add(r.def)
	for _, cs := range r.routes {
		add(cs)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Candidate < out[j].Candidate })
	return out
}

// breaker reads one candidate's breaker without touching it (unlike skip,
// which lets a half-open probe through).
func (r *Router) breaker(name string, now time.Time) Breaker {
	b := Breaker{Candidate: name}
	v, ok := r.health.Load(name)
	if !ok {
		return b
	}
	h := v.(*health)
	h.mu.Lock()
	defer h.mu.Unlock()
	b.Failures = h.failures
	if !h.openUntil.IsZero() && now.Before(h.openUntil) {
		b.Open, b.Until = true, h.openUntil
	}
	return b
}

// Blocked is a route none of whose candidates can take a call now: it has
// none, or every one's breaker is open. (The router still tries open
// candidates in order when nothing else is left, so calls on it are not
// refused outright; they are likely to fail.)
type Blocked struct {
	Type llm.RequestType
	Tier llm.Tier
	// Open names the route's candidates, all open; empty when the route
	// has no candidate at all.
	Open []string
}

// Blocked lists the routes, in request-type then tier order, that have no
// candidate whose breaker is closed: what a readiness probe reports.
func (r *Router) Blocked() []Blocked {
	now := r.opts.Now()
	var out []Blocked
	for _, t := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			cands := r.candidates(t, tier)
			if t == llm.TypeEmbedding && !anyEmbedder(cands) {
				// Embeddings are not offered (no configured upstream
				// serves them): a call is refused, nothing is blocked.
				continue
			}
			b := Blocked{Type: t, Tier: tier}
			usable := false
			for _, c := range cands {
				if !r.breaker(c.Name, now).Open {
					usable = true
					break
				}
				b.Open = append(b.Open, c.Name)
			}
			if !usable {
				out = append(out, b)
			}
		}
	}
	return out
}

// anyEmbedder reports whether any of cands can serve embeddings.
func anyEmbedder(cands []Candidate) bool {
	for _, c := range cands {
		if _, ok := c.Backend.(Embedder); ok {
			return true
		}
	}
	return false
}
