package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"

	"github.com/svcgw/svcgw/llm"
)

// What the three protocol backends share when translating (docs/translation.md).

// NewCallID returns a gateway-issued tool-call id. Every tool call a
// protocol backend returns gets one in place of the vendor's (toolu_…,
// call_…, or none at all from Gemini), so that no id tells a caller which
// backend answered. The caller sends it back with the result, and the next
// request carries it on both the call and the result, which is all the
// vendors check. It is llm.NewID's: 24 base62 characters, drawn without
// the modulo bias of a byte taken mod 62.
func NewCallID() string { return llm.NewID("call_", 24) }

// Reasoning signatures.
//
// A signature (Anthropic's thinking signature or redacted_thinking data,
// Gemini's thoughtSignature) is valid only at the vendor that issued it
// (docs/translation.md#ground-rules, rule 3), and sending one to another vendor fails the call.
// Since calls of one conversation are classified one by one, consecutive
// turns often go to different backends. So every signature a backend
// returns carries a short tag saying which protocol issued it, and a
// backend sends upstream only the signatures with its own tag, dropping the
// others with their reasoning. The tags are neutral: they do not name a
// vendor.
//
// The redacted tag also says that an Anthropic reasoning part is a
// redacted_thinking block: a stream has no other way to say so
// (llm.Event has no Redacted field), and the caller replays it as a
// thinking block with that signature.
const (
	SigThinking = "sg1." // Anthropic thinking block signature
	SigRedacted = "sg2." // Anthropic redacted_thinking data
	SigThought  = "sg3." // Gemini thoughtSignature
)

// TagSig tags a vendor signature; "" stays "".
func TagSig(tag, sig string) string {
	if sig == "" {
		return ""
	}
	return tag + sig
}

// UntagSig returns the vendor signature in s if s carries tag.
func UntagSig(tag, s string) (string, bool) {
	sig, ok := strings.CutPrefix(s, tag)
	return sig, ok && sig != ""
}

// InputUsage is the input side of u, which a stream's first event carries
// when the upstream reports it before the reply (llm.Event.Usage).
func InputUsage(u llm.Usage) *llm.Usage {
	return &llm.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheCreationTokens: u.CacheCreationTokens, CacheCreation1hTokens: u.CacheCreation1hTokens}
}

// System guidance inside the conversation (llm.RoleSystem) has no slot in
// the messages and generate-content protocols, whose turns are user or
// model only. It goes into the user turn at its place as one text part
// wrapped in <system-reminder> tags: the marking coding agents (Claude Code
// first) use for guidance that is the operator's, not the user's, and that
// models are trained to read so.
const (
	guidanceOpen  = "<system-reminder>\n"
	guidanceClose = "\n</system-reminder>"
)

// SystemGuidance renders a RoleSystem message's text parts as that one
// part, keeping the last part's cache breakpoint.
func SystemGuidance(parts []llm.Part) []llm.Part {
	var b strings.Builder
	var cc *llm.CacheControl
	for _, p := range parts {
		if p.Type != llm.PartText || p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.Text)
		cc = p.CacheControl
	}
	if b.Len() == 0 {
		return nil
	}
	return []llm.Part{{Type: llm.PartText, Text: guidanceOpen + b.String() + guidanceClose, CacheControl: cc}}
}

// ArgsObject returns a tool call's arguments as the JSON object Anthropic
// and Gemini require: compacted when they are one, {} when empty, and
// otherwise (malformed model output the caller sent back) wrapped as
// {"_raw": "<text>"} (docs/translation.md#tool-calls-and-results, policy).
func ArgsObject(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	if raw[0] == '{' && json.Valid(raw) {
		return llm.CompactJSON(raw)
	}
	b, _ := json.Marshal(map[string]string{"_raw": string(raw)})
	return b
}

// IsJSONObject reports whether s is a JSON object.
func IsJSONObject(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
}

// TextOf joins the text parts of ps.
func TextOf(ps []llm.Part) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Type == llm.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// SystemText returns the system prompt's parts, which must all be text.
func SystemText(req *llm.Request) ([]llm.Part, error) {
	for _, p := range req.System {
		if p.Type != llm.PartText {
			return nil, llm.InvalidParam("system", "system prompts may only hold text")
		}
	}
	return req.System, nil
}

// DataURL returns a base64 data URL.
func DataURL(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// AllowedTools returns the tools the request lets the model call: all of
// them, or those in ToolChoice.Allowed.
func AllowedTools(req *llm.Request) []llm.Tool {
	if len(req.ToolChoice.Allowed) == 0 {
		return req.Tools
	}
	var out []llm.Tool
	for _, t := range req.Tools {
		for _, name := range req.ToolChoice.Allowed {
			if t.Name == name {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Effort levels and thinking budgets (docs/translation.md#reasoning, policy): low ≈ 1k
// tokens, medium ≈ 8k, high ≈ 24k.
const (
	budgetLow    = 1024
	budgetMedium = 8192
	budgetHigh   = 24576
	budgetMax    = 32768
)

// EffortLevel normalizes a caller's effort string (any surface's
// vocabulary) to none, minimal, low, medium, high, xhigh or max; "" when
// it is empty or unknown.
func EffortLevel(e string) string {
	switch e = strings.ToLower(strings.TrimSpace(e)); e {
	case "none", "minimal", "low", "medium", "high", "xhigh", "max":
		return e
	}
	return ""
}

// EffortBudget is the thinking budget of an effort level; 0 for none.
func EffortBudget(level string) int {
	switch level {
	case "minimal", "low":
		return budgetLow
	case "medium":
		return budgetMedium
	case "high":
		return budgetHigh
	case "xhigh", "max":
		return budgetMax
	}
	return 0
}

// BudgetEffort is the effort level nearest a thinking budget.
func BudgetEffort(budget int) string {
	switch {
	case budget <= 2*budgetLow:
		return "low"
	case budget <= (budgetMedium+budgetHigh)/2:
		return "medium"
	}
	return "high"
}

// AddTokens adds two reported counts without wrapping around: a sum past
// the int range saturates (and is then bounded like any other count).
func AddTokens(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}
