package billing

import "github.com/svcgw/svcgw/llm"

// ReserveOutputTokens is the most output tokens a reservation covers: a
// call that sets no max_tokens, or a larger one, reserves this many. Output
// beyond it is charged but was not reserved, which is what bounds the
// overdraft (see Admission).
const ReserveOutputTokens = 4096

// ReservedOutputTokens is how many output tokens a call reserves: its
// max_tokens, or else the model's max completion tokens, and never more than
// ceiling (ReserveOutputTokens unless configured otherwise). Zero means
// unknown.
func ReservedOutputTokens(maxTokens, modelMax, ceiling int) int {
	n := maxTokens
	if n <= 0 {
		n = modelMax
	}
	if n <= 0 || n > ceiling {
		n = ceiling
	}
	return n
}

// Ceiling returns the cost ceiling of a call in micro-dollars: what it
// costs at the price of type t and tier tier with inputTokens of input and
// outputTokens of output, and the input priced at the dearest rate it could
// be charged at. Input is priced uncached (cache reads are cheaper), or,
// when the request marks cache breakpoints, as written to the cache with
// the longest lifetime asked for, if that rate is higher. It rounds up
// exactly as Cost does, so a call whose usage stays within these counts
// never costs more than its ceiling.
func (p *Prices) Ceiling(t llm.RequestType, tier llm.Tier, req *llm.Request, inputTokens, outputTokens int) int64 {
	e := p.lookup(t, tier)
	u := llm.Usage{InputTokens: inputTokens, OutputTokens: outputTokens}
	ceil := e.costMicros(u)
	if writes, oneHour := cacheBreakpoints(req); writes {
		u.CacheCreationTokens = inputTokens
		ceil = max(ceil, e.costMicros(u))
		if oneHour {
			u.CacheCreation1hTokens = inputTokens
			ceil = max(ceil, e.costMicros(u))
		}
	}
	return int64(ceil) // Admission's unit (see Claim)
}

// cacheBreakpoints reports whether req marks any prompt-cache breakpoint,
// and whether any asks for the one-hour lifetime.
func cacheBreakpoints(req *llm.Request) (marked, oneHour bool) {
	if req == nil { // a call with no prompt to cache: an embedding
		return false, false
	}
	see := func(cc *llm.CacheControl) {
		if cc != nil {
			marked = true
			oneHour = oneHour || cc.TTL == "1h"
		}
	}
	see(req.CacheControl)
	for i := range req.Tools {
		see(req.Tools[i].CacheControl)
	}
	for i := range req.System {
		see(req.System[i].CacheControl)
	}
	for i := range req.Messages {
		for j := range req.Messages[i].Parts {
			see(req.Messages[i].Parts[j].CacheControl)
		}
	}
	return marked, oneHour
}
