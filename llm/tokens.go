package llm

import "unicode/utf8"

// Token estimates. svcgw never runs a tokenizer: these are advisory counts,
// used where no backend reports real usage (count-tokens endpoints, the
// `long` classification threshold, reservations, tokens-per-minute, the
// fixture backend). They are deterministic.
const (
	tokensPerMessage  = 4    // role and framing overhead per turn
	tokensPerImage    = 765  // a tiled image at high detail
	tokensPerPDFPage  = 1500 // text plus page image, per ~3 KB of PDF
	bytesPerPDFPage   = 3000
	tokensPerToolCall = 8
)

// TextTokens estimates the tokens of a piece of text, conservatively and
// whatever its script, the way the vendors' byte-level BPE tokenizers
// (OpenAI's o200k_base and cl100k_base, Anthropic's and Gemini's) see it.
// It splits the text into runs as their pre-tokenizers do and rounds each
// run up to whole tokens:
//
//	ASCII letters, and 2-byte characters (accented Latin,   4 per token
//	Greek, Cyrillic, Hebrew, Arabic: 2 each) in one run
//	ASCII digits (numbers split into groups of three)      3 per token
//	ASCII punctuation and symbols                          2 per token
//	white space: a single space joins the next run (free), 1 token per run
//	other runs (newlines, indentation, several spaces)
//	3-byte characters (CJK, kana, Hangul, Indic, Thai…)     1.25 tokens each
//	4-byte characters (emoji, rare CJK)                     3 tokens each
//	bytes that are not UTF-8                                1 token each
//
// What the vendors publish, and what this stays above: about 4 characters
// a token for English with OpenAI's tokenizers and Gemini's ("1 token ≈ 4
// characters ≈ ¾ of a word": OpenAI's and Google's token guides) and about
// 3.5 with Claude's (Anthropic's token counting guide); code tokenizes
// denser, around 3 characters a token, since punctuation, digits and
// indentation take tokens of their own; CJK text takes roughly 1 token per
// character (more with cl100k for rarer characters, fewer with o200k), and
// an emoji 1 to 3 (byte-level fallback for rarer ones; a ZWJ sequence
// counts each part). TextTokens never under-estimates these figures by
// more than a factor of 1.25 (it returns at least 80% of them) for English
// prose, code and JSON, CJK text and emoji; the tests in tokens_test.go
// hold it to that on samples of each. It over-estimates more often than
// not (o200k is the most frugal), which only makes reservations and
// rate limits safer.
//
// It is one pass over the bytes with no allocation; non-empty text is at
// least one token.
func TextTokens(s string) int {
	tokens, run := 0, 0
	cls := clsNone
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			// ASCII, most text: one table lookup per byte.
			cw := ascii[c]
			if k := uint8(cw >> 8); k != cls {
				tokens += runTokens(cls, run)
				cls, run = k, 0
			}
			run += int(cw & 0xff)
			i++
			// The rest of the run, without the class switch above: words
			// and indentation are mostly runs of one kind of byte.
			for i < len(s) && s[i] < utf8.RuneSelf && uint8(ascii[s[i]]>>8) == cls {
				run += int(ascii[s[i]] & 0xff)
				i++
			}
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		k, w := clsAstral, tokenUnits // not UTF-8: the tokenizers fall back to a byte each
		switch size {
		case 2:
			k, w = clsLetter, 30
		case 3:
			k, w = clsWide, 75
		case 4:
			w = 180
		}
		if k != cls {
			tokens += runTokens(cls, run)
			cls, run = k, 0
		}
		run += w
		i += size
	}
	return tokens + runTokens(cls, run)
}

// tokenUnits is one token in TextTokens' fixed-point weights.
const tokenUnits = 60

// Character classes of TextTokens' runs.
const (
	clsNone uint8 = iota
	clsLetter
	clsDigit
	clsPunct
	clsSpace
	clsWide
	clsAstral
)

// runTokens is the whole tokens of a run of units: rounded up, except that
// a lone space (weight 1) is part of the next run, as in the tokenizers'
// " word" tokens.
func runTokens(cls uint8, units int) int {
	if cls == clsSpace && units <= 1 {
		return 0
	}
	return (units + tokenUnits - 1) / tokenUnits
}

// ascii holds each ASCII byte's class (high byte) and weight (low byte).
var ascii = func() (t [utf8.RuneSelf]uint16) {
	for c := range utf8.RuneSelf {
		cls, w := clsPunct, 30
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			cls, w = clsLetter, 15
		case c >= '0' && c <= '9':
			cls, w = clsDigit, 20
		case c == ' ':
			cls, w = clsSpace, 1
		case c == '\t', c == '\n', c == '\r', c == '\v', c == '\f':
			cls, w = clsSpace, tokenUnits
		}
		t[c] = uint16(cls)<<8 | uint16(w)
	}
	return t
}()

// TruncateTokens returns the longest prefix of s, cut between characters,
// that TextTokens counts as at most n tokens.
func TruncateTokens(s string, n int) string {
	if TextTokens(s) <= n {
		return s
	}
	// TextTokens only grows as a prefix grows: search the cut.
	lo, hi := 0, len(s) // TextTokens(s[:lo]) <= n < TextTokens(s[:hi])
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		for mid > lo && !utf8.RuneStart(s[mid]) {
			mid--
		}
		if mid == lo {
			mid = (lo + hi) / 2
			for mid < hi && !utf8.RuneStart(s[mid]) {
				mid++
			}
			if mid == hi {
				break
			}
		}
		if TextTokens(s[:mid]) <= n {
			lo = mid
		} else {
			hi = mid
		}
	}
	return s[:lo]
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
