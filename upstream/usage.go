package upstream

import (
	"log/slog"

	"github.com/svcgw/svcgw/llm"
)

// Usage reported by an upstream is what the call is billed by, so it is
// bounded here, at the boundary, before anything above sees it. A real
// model cannot exceed what it was asked for: its output is capped by the
// max_tokens sent (never above the caller's: the protocol backends cap it), and
// its input by the model's context length. An upstream that reports more
// (a bug, a proxy that adds up several calls, a hostile server) is charged
// at those bounds, and the operator's log says so (WARN, naming the
// candidate); negative counts become zero, and the parts of a count
// (cached, cache-write, reasoning) never exceed their totals.

// maxUsageTokens bounds any one token count when the model's limits are
// not configured: far above every context window on the market (the
// largest are around 10 million tokens), and far below anything that
// could overflow a cost.
const maxUsageTokens = 100_000_000

// usageBounds are the most a call may report.
type usageBounds struct {
	input, output int
}

// boundsFor returns the usage bounds of req on a candidate with limits
// lim: output at the call's max_tokens (or the model's max completion
// tokens, or its context length), input at the context length.
func boundsFor(req *llm.Request, lim Limits) usageBounds {
	b := usageBounds{input: maxUsageTokens, output: maxUsageTokens}
	if lim.ContextLength > 0 {
		b.input = min(lim.ContextLength, maxUsageTokens)
		b.output = b.input
	}
	if lim.MaxCompletionTokens > 0 {
		b.output = min(b.output, lim.MaxCompletionTokens)
	}
	if req.MaxTokens > 0 {
		b.output = min(b.output, req.MaxTokens)
	}
	return b
}

// apply returns u within b, and whether anything had to change.
func (b usageBounds) apply(u llm.Usage) (llm.Usage, bool) {
	in := u
	clamp := func(n, hi int) int { return min(max(n, 0), hi) }
	u.InputTokens = clamp(u.InputTokens, b.input)
	u.OutputTokens = clamp(u.OutputTokens, b.output)
	u.ReasoningTokens = clamp(u.ReasoningTokens, u.OutputTokens)
	// Cache writes are dearer than uncached input and cache reads cheaper:
	// when the parts add up to more than the total, the reads give way.
	u.CacheCreationTokens = clamp(u.CacheCreationTokens, u.InputTokens)
	u.CacheCreation1hTokens = clamp(u.CacheCreation1hTokens, u.CacheCreationTokens)
	u.CachedInputTokens = clamp(u.CachedInputTokens, u.InputTokens-u.CacheCreationTokens)
	return u, u != in
}

// checkUsage bounds one call's usage and logs what it changed.
func checkUsage(log *slog.Logger, candidate string, b usageBounds, u llm.Usage) llm.Usage {
	out, changed := b.apply(u)
	if changed {
		log.Warn("upstream reported usage beyond the call's bounds; charged at the bounds",
			"candidate", candidate,
			"reported_input", u.InputTokens, "reported_output", u.OutputTokens,
			"reported_cached", u.CachedInputTokens, "reported_cache_write", u.CacheCreationTokens,
			"reported_reasoning", u.ReasoningTokens,
			"input", out.InputTokens, "output", out.OutputTokens,
			"max_input", b.input, "max_output", b.output)
	}
	return out
}
