package llm

import "unicode/utf8"

// Token estimates. svcgw never runs a tokenizer: these are advisory counts,
// used where no backend reports real usage (count-tokens endpoints, the
// `long` classification threshold, the fixture backend). They are
// deterministic and roughly a quarter of the text's characters, like the
// tokenizers of the vendors' current models.
const (
	tokensPerMessage  = 4    // role and framing overhead per turn
	tokensPerImage    = 765  // a tiled image at high detail
	tokensPerPDFPage  = 1500 // text plus page image, per ~3 KB of PDF
	bytesPerPDFPage   = 3000
	tokensPerToolCall = 8
)

// TextTokens estimates the tokens of a piece of text: one per four
// characters, rounded up, and at least one for non-empty text.
func TextTokens(s string) int {
	if s == "" {
		return 0
	}
	return (utf8.RuneCountInString(s) + 3) / 4
}

// PartTokens estimates the tokens of one part.
func PartTokens(p Part) int {
	switch p.Type {
	case PartText, PartReasoning:
		return TextTokens(p.Text)
	case PartImage:
		return tokensPerImage
	case PartDocument:
		pages := (len(p.Data) + bytesPerPDFPage - 1) / bytesPerPDFPage
		if pages < 1 {
			pages = 1
		}
		return pages*tokensPerPDFPage + TextTokens(p.Title)
	case PartToolCall:
		if p.ToolCall == nil {
			return 0
		}
		return tokensPerToolCall + TextTokens(p.ToolCall.Name) + TextTokens(string(p.ToolCall.Arguments))
	case PartToolResult:
		if p.ToolResult == nil {
			return 0
		}
		n := tokensPerToolCall
		for _, c := range p.ToolResult.Content {
			n += PartTokens(c)
		}
		return n
	}
	return 0
}

// ToolTokens estimates the tokens of one tool definition.
func ToolTokens(t Tool) int {
	return tokensPerToolCall + TextTokens(t.Name) + TextTokens(t.Description) + TextTokens(string(t.Parameters))
}

// InputTokens estimates the prompt tokens of a request: tools, system prompt
// and messages, in that order (the order prompt caches see them in), plus
// the response schema.
func (r *Request) InputTokens() int {
	n := 0
	for _, t := range r.Tools {
		n += ToolTokens(t)
	}
	if len(r.System) > 0 {
		n += tokensPerMessage
		for _, p := range r.System {
			n += PartTokens(p)
		}
	}
	for _, m := range r.Messages {
		n += tokensPerMessage
		for _, p := range m.Parts {
			n += PartTokens(p)
		}
	}
	if r.ResponseFormat != nil {
		n += TextTokens(string(r.ResponseFormat.Schema))
	}
	return n
}
