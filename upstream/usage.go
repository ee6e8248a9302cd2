package upstream

import (
	"log/slog"

	"github.com/svcgw/svcgw/llm"
)

// Usage reported by an upstream is what the call is billed by, so it is
// bounded here, at the boundary, before anything above sees it. A real
// model cannot exceed what it was asked for: its output is capped by the
// max_tokens sent (never above the caller's: the protocol backends cap it),
// and its input by the prompt svcgw sent, which svcgw counted itself
// (llm.Request.PromptTokens) before sending it, within the margin below
// and never above the model's context length. An upstream that reports
// more (a bug, a proxy that adds up several calls, a hostile server) is
// charged at those bounds, and the operator's log says so (WARN, naming
// the candidate); negative counts become zero, and the parts of a count
// (cached, cache-write, reasoning) never exceed their totals.
//
// The input margin. svcgw's count is an estimate, not the vendor's
// tokenizer, so the bound allows what the estimate cannot see:
//
//	text (llm.TextTokens, at least 80% of the vendors'       × 2
//	counts on every sample tokens_test.go holds it to)
//	framing the vendor adds (chat templates, the system      + 1,024
//	prompt it writes for tool use: a few hundred tokens)
//	each image (counted as 765: OpenAI's patch models bill   + 16,384
//	up to about 2,500 for one image, Gemini 258 per 768 px
//	tile, Anthropic about 1,600 at its largest size)
//	each opaque reasoning replay token (its bytes: encrypted + 1 a byte
//	reasoning is larger than the tokens it carries)
//	a document (a PDF)                                         context length
//
// A PDF's pages cannot be counted from its size (a hundred pages of text
// fit in 50 KB, and each page costs its text plus an image of the page),
// so a call that carries one is bounded by the context length alone.
// The margin only ever decides an upstream's over-report; when it is too
// tight for some real prompt, the call is charged less than the vendor's
// count and the WARN says so, so the operator can see it.

// maxUsageTokens bounds any one token count when the model's limits are
// not configured: far above every context window on the market (the
// largest are around 10 million tokens), and far below anything that
// could overflow a cost.
const maxUsageTokens = 100_000_000

// usageBounds are the most a call may report.
type usageBounds struct {
	input, output int
}

// Input margin of a prompt svcgw counted (see the table above).
const (
	inputTextFactor   = 2
	inputOverhead     = 1024
	inputPerImage     = 16384
	inputPerSignature = 1 // per byte of an opaque reasoning replay token
)

// boundsFor returns the usage bounds of req on a candidate with limits
// lim: output at the call's max_tokens (or the model's max completion
// tokens, or its context length), input at svcgw's own count of the
// prompt with its margin, never above the context length.
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
	if in, ok := inputBound(req); ok {
		b.input = min(b.input, in)
	}
	return b
}

// inputBound is the most input req's prompt can be billed as, and false
// when svcgw cannot bound it (it carries a document).
func inputBound(req *llm.Request) (int, bool) {
	counted := req.PromptTokens
	if counted <= 0 {
		counted = req.InputTokens()
	}
	extra, ok := 0, true
	var parts func(ps []llm.Part)
	parts = func(ps []llm.Part) {
		for _, p := range ps {
			switch p.Type {
			case llm.PartImage:
				extra += inputPerImage
			case llm.PartDocument:
				ok = false
			case llm.PartReasoning:
				extra += len(p.Signature) * inputPerSignature
			case llm.PartToolCall:
				if p.ToolCall != nil {
					extra += len(p.ToolCall.Signature) * inputPerSignature
				}
			case llm.PartToolResult:
				if p.ToolResult != nil {
					parts(p.ToolResult.Content)
				}
			}
		}
	}
	parts(req.System)
	for _, m := range req.Messages {
		parts(m.Parts)
	}
	if !ok {
		return 0, false
	}
	// Prompts big enough to overflow this were refused long before.
	return min(counted*inputTextFactor+inputOverhead+extra, maxUsageTokens), true
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
