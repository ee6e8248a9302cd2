package upstream

import (
	"errors"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Report is what the router tells the operator about one call: every
// attempt it made, in order, and the candidate that served the call.
// Callers never see it: it names backends. Complete and Stream return it
// whether the call succeeded or not.
type Report struct {
	// Candidate is the Name of the candidate that served the call; "" when
	// none did.
	Candidate string
	// Attempts are the calls made to candidates, retries and fallbacks
	// included; empty only when the route has no candidate.
	Attempts []Attempt
}

// Attempt is one call to one candidate.
type Attempt struct {
	Candidate string // Candidate.Name
	// Outcome is how the attempt ended.
	Outcome Outcome
	// Err is why it failed, as the backend said it (it may name the
	// backend: for operator logs only); nil when it succeeded.
	Err error
	// Retry is set when the attempt tried the same candidate again, after
	// waiting Backoff. An attempt after the first that is no retry is a
	// fallback to the next candidate.
	Retry   bool
	Backoff time.Duration
	// Duration is how long the attempt took: to the whole reply for
	// Complete, to the first event for Stream.
	Duration time.Duration
	// BreakerOpen reports that the candidate's circuit breaker was open
	// once the attempt's outcome was counted: calls skip the candidate
	// until its cooldown ends.
	BreakerOpen bool
}

// Outcome is how an attempt ended: OutcomeOK, OutcomeCanceled, or the
// llm.Kind of its failure as the caller would see it (rate_limited,
// overloaded, timeout, upstream, invalid_request, …). It is a closed set,
// fit for a metric label.
type Outcome string

// Outcomes that are no failure kind.
const (
	OutcomeOK       Outcome = "ok"
	OutcomeCanceled Outcome = "canceled" // the caller's context ended first
)

// failed completes a failed attempt: cause is the backend's error, safe
// what the router made of it (an *llm.Error, or the caller's ctx.Err()).
func (a Attempt) failed(cause, safe error, breakerOpen bool) Attempt {
	a.Err, a.BreakerOpen, a.Outcome = cause, breakerOpen, OutcomeCanceled
	var e *llm.Error
	if errors.As(safe, &e) {
		a.Outcome = Outcome(e.Kind)
	}
	return a
}

// Retries counts the attempts that retried a candidate.
func (r Report) Retries() int {
	n := 0
	for _, a := range r.Attempts {
		if a.Retry {
			n++
		}
	}
	return n
}

// Fallbacks counts the moves from one candidate to the next.
func (r Report) Fallbacks() int {
	n := 0
	for i, a := range r.Attempts {
		if i > 0 && !a.Retry {
			n++
		}
	}
	return n
}
