// Package classify decides the request type and effort tier of a call from its
// shape: a pure function of the canonical request, the surface it came in on
// and the X-SVC-Effort header. The caller cannot choose a request type; the
// server returns the result in the X-SVC-Request-Type header, and the router
// and the price table key on it.
//
// classify imports only llm. It does no I/O, keeps no state and never logs.
//
// # Request type
//
// The first rule that matches wins. Capability needs come first, because a
// backend that lacks the capability cannot serve the call at all; hints come
// after them.
//
//  1. document: a PDF document part anywhere: system prompt, messages, or the
//     content of a tool result. An image part whose media type is
//     application/pdf counts as a document too. Beats everything, including
//     the model id and the effort.
//  2. vision: an image part anywhere (system, messages, tool results),
//     whatever the model id.
//  3. code: tools are offered (even with tool_choice "none": the tool catalog
//     is still in the prompt and the next turn of the loop will need it, so
//     the call stays on the tool-capable route and its prompt cache), or the
//     history holds tool calls or tool results (only a tool-capable backend
//     accepts such a history, even when the caller stopped offering tools).
//  4. json: a response format is requested (a JSON schema, or JSON-object
//     mode without a schema).
//  5. long: the estimated input (llm.Request.InputTokens) is over
//     LongThreshold tokens.
//  6. reason: reasoning is requested and not switched off (reasoning_effort,
//     thinking, includeThoughts: Request.Reasoning != nil && Enabled), or the
//     effective effort is high and the model id hints at a reasoning model
//     (an id token o1, o3, o4, r1, qwq, reason, reasoner, reasoning, think or
//     thinking). Reasoning explicitly switched off (Enabled false) is never
//     reason.
//  7. flash or pro, as the next section says.
//
// # Flash or pro
//
// svc-fusion, svc-saver and svc-max behave the same on every surface (they
// are one model): effective effort low gives flash; medium, high and auto
// give pro.
//
// Other ids on the generate-content surface: the id decides and effort only
// changes the tier. An id containing "flash", or with a "lite" token, gives
// flash; any other id gives pro.
//
// Other ids on the other surfaces: effective effort low gives flash; medium
// and high give pro; under auto the id decides: a token mini, nano, haiku,
// flash, lite, small, fast or saver gives flash, anything else pro.
//
// Model ids are compared case-insensitively, after trimming spaces and
// dropping any path before the last "/" ("models/gemini-2.5-flash" is
// "gemini-2.5-flash"). Tokens are the runs of letters and digits of the id, so
// "gpt-4o-mini" has the token "mini" but "gemini-2.5-pro" has none.
//
// # Effort and tier
//
// The effective effort is pinned by the model id when it is svc-saver (low)
// or svc-max (high), whatever X-SVC-Effort says; otherwise (svc-fusion and
// every other id) it is the header's value, auto when absent.
//
// The tier is the effective effort when that is low, medium or high, for
// every request type. Under auto the tier follows the type: flash is low;
// pro, long, code, json, vision and document are medium; reason takes the
// caller's own reasoning effort (minimal or low gives low, medium gives
// medium) and is high otherwise (high, xhigh, max, or a budget or flag
// without an effort).
//
// Effort never changes a capability type (document, vision, code, json); it
// only changes the tier, and, for calls that reach rule 7, flash versus pro.
package classify

import (
	"strings"

	"github.com/svcgw/svcgw/llm"
)

// LongThreshold is the estimated input size, in tokens as counted by
// llm.Request.InputTokens, above which a call is classified long: large
// enough that a backend chosen for long contexts (and priced for them)
// should serve it, whatever the call's other hints.
const LongThreshold = 32000

// The model ids svcgw lists. They are one model with three effort settings.
const (
	ModelFusion = "svc-fusion" // effort from X-SVC-Effort, auto by default
	ModelSaver  = "svc-saver"  // effort pinned low
	ModelMax    = "svc-max"    // effort pinned high
)

// Input is what classification looks at.
type Input struct {
	Request *llm.Request
	Surface llm.Surface
	// Effort is the parsed X-SVC-Effort header (see ParseEffort); the zero
	// value means auto.
	Effort llm.Effort
	// InputTokens is Request.InputTokens() when the caller has it already
	// (the estimate reads every byte of the prompt); 0 computes it.
	InputTokens int
}

// Result is the outcome of classification.
type Result struct {
	Type llm.RequestType
	Tier llm.Tier
}

// flashTokens are id tokens that hint at a small, fast model.
var flashTokens = []string{"mini", "nano", "haiku", "flash", "lite", "small", "fast", "saver"}

// reasoningTokens are id tokens that hint at a reasoning model.
var reasoningTokens = []string{"o1", "o3", "o4", "r1", "qwq", "reason", "reasoner", "reasoning", "think", "thinking"}

// Classify returns the request type and tier of a call. See the package
// documentation for the rules. A nil Request classifies as an empty one.
func Classify(in Input) Result {
	req := in.Request
	if req == nil {
		req = &llm.Request{}
	}
	id := normalizeID(req.Model)
	effort := effectiveEffort(id, in.Effort)

	t := requestType(req, in.InputTokens, in.Surface, id, effort)
	return Result{Type: t, Tier: tier(t, effort, req.Reasoning)}
}

// Embedding classifies an embeddings call: its type is always embedding
// (the endpoint decides it, never the content), and its tier the effective
// effort of the model id and X-SVC-Effort as for a generation (svc-saver
// low, svc-max high, else the header), medium under auto.
func Embedding(model string, effort llm.Effort) Result {
	return Result{Type: llm.TypeEmbedding, Tier: tier(llm.TypeEmbedding, effectiveEffort(normalizeID(model), effort), nil)}
}

// inputTokens is input, the caller's estimate, or when it is 0 the
// request's own (not cmp.Or(input, req.InputTokens()), whose arguments
// are both evaluated: the prompt's every byte read again).
func inputTokens(req *llm.Request, input int) int {
	if input != 0 {
		return input
	}
	return req.InputTokens()
}

// requestType applies the rules in order.
func requestType(req *llm.Request, input int, surface llm.Surface, id string, effort llm.Effort) llm.RequestType {
	var c contentScan
	c.parts(req.System)
	for _, m := range req.Messages {
		c.parts(m.Parts)
	}
	switch {
	case c.document:
		return llm.TypeDocument
	case c.image:
		return llm.TypeVision
	case len(req.Tools) > 0 || c.tools:
		return llm.TypeCode
	case req.ResponseFormat != nil:
		return llm.TypeJSON
	case inputTokens(req, input) > LongThreshold:
		return llm.TypeLong
	case wantsReasoning(req.Reasoning, id, effort):
		return llm.TypeReason
	}
	return flashOrPro(surface, id, effort)
}

// contentScan records which kinds of content a request holds, in one pass.
type contentScan struct {
	document, image, tools bool
}

func (c *contentScan) parts(ps []llm.Part) {
	for i := range ps {
		p := &ps[i]
		switch p.Type {
		case llm.PartDocument:
			c.document = true
		case llm.PartImage:
			// A surface that carries PDFs as generic inline data (Gemini
			// inlineData) may hand one over as an image part.
			if strings.EqualFold(p.MediaType, "application/pdf") {
				c.document = true
			} else {
				c.image = true
			}
		case llm.PartToolCall:
			c.tools = true
		case llm.PartToolResult:
			c.tools = true
			if p.ToolResult != nil {
				c.parts(p.ToolResult.Content)
			}
		}
	}
}

// wantsReasoning is rule 6.
func wantsReasoning(r *llm.Reasoning, id string, effort llm.Effort) bool {
	if r != nil {
		// An explicit "off" beats any hint.
		return r.Enabled
	}
	return effort == llm.EffortHigh && hasToken(id, reasoningTokens)
}

// flashOrPro is rule 7.
func flashOrPro(surface llm.Surface, id string, effort llm.Effort) llm.RequestType {
	own := id == ModelFusion || id == ModelSaver || id == ModelMax
	if surface == llm.SurfaceGenContent && !own {
		// docs/request-types.md: on generate-content, flash-named ids lean flash and
		// other ids pro. The id is the caller's explicit model choice there.
		if strings.Contains(id, "flash") || hasToken(id, []string{"lite"}) {
			return llm.TypeFlash
		}
		return llm.TypePro
	}
	switch effort {
	case llm.EffortLow:
		return llm.TypeFlash
	case llm.EffortMedium, llm.EffortHigh:
		return llm.TypePro
	}
	if !own && hasToken(id, flashTokens) {
		return llm.TypeFlash
	}
	return llm.TypePro
}

// tier maps the effective effort to a tier, resolving auto by request type.
func tier(t llm.RequestType, effort llm.Effort, r *llm.Reasoning) llm.Tier {
	switch effort {
	case llm.EffortLow:
		return llm.TierLow
	case llm.EffortMedium:
		return llm.TierMedium
	case llm.EffortHigh:
		return llm.TierHigh
	}
	switch t {
	case llm.TypeFlash:
		return llm.TierLow
	case llm.TypeReason:
		if r != nil {
			switch strings.ToLower(strings.TrimSpace(r.Effort)) {
			case "minimal", "low":
				return llm.TierLow
			case "medium":
				return llm.TierMedium
			}
		}
		return llm.TierHigh
	}
	return llm.TierMedium
}

// effectiveEffort applies the pinned ids; header is the parsed header value.
func effectiveEffort(id string, header llm.Effort) llm.Effort {
	switch id {
	case ModelSaver:
		return llm.EffortLow
	case ModelMax:
		return llm.EffortHigh
	}
	switch header {
	case llm.EffortLow, llm.EffortMedium, llm.EffortHigh:
		return header
	}
	return llm.EffortAuto
}

// normalizeID lowercases and trims a model id and drops any path prefix.
func normalizeID(model string) string {
	id := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	return id
}

// hasToken reports whether one of the alphanumeric runs of id is in want.
func hasToken(id string, want []string) bool {
	for tok := range strings.FieldsFuncSeq(id, notAlnum) {
		for _, w := range want {
			if tok == w {
				return true
			}
		}
	}
	return false
}

func notAlnum(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
}

// maxEchoedEffort bounds how much of a bad header value an error repeats.
const maxEchoedEffort = 32

// ParseEffort parses the X-SVC-Effort header. An empty (or all-space) value is
// auto; otherwise the value, trimmed and compared case-insensitively, must be
// auto, low, medium or high. Anything else is an invalid_request error naming
// the header.
func ParseEffort(header string) (llm.Effort, error) {
	v := strings.ToLower(strings.TrimSpace(header))
	switch llm.Effort(v) {
	case "", llm.EffortAuto:
		return llm.EffortAuto, nil
	case llm.EffortLow, llm.EffortMedium, llm.EffortHigh:
		return llm.Effort(v), nil
	}
	shown := strings.TrimSpace(header)
	if len(shown) > maxEchoedEffort {
		shown = shown[:maxEchoedEffort] + "..."
	}
	return "", llm.InvalidParam("X-SVC-Effort",
		"invalid X-SVC-Effort header %q: allowed values are auto, low, medium and high", shown)
}
