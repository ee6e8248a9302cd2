package openai

import (
	"bytes"
	"slices"

	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Reading a stream chunk with protocol.Scanner.
//
// A chat-completions stream is mostly chunks that carry a few words of one
// choice's delta; decoding each through encoding/json's reflection was the
// largest cost of relaying a stream (~2 µs a chunk, bench/RESULTS.md). The
// scanner reads the fields oaChunk has straight from the text and skips
// the rest (id, object, created, model, system_fingerprint, logprobs, a
// delta's role), filling the chunk exactly as json.Unmarshal would. Tool
// calls, content sent as an array of parts, error frames and anything
// else it does not decide the same way are left to encoding/json
// (FuzzScanChunk checks the two agree).

// scanChunk fills c, whose Choices are empty, from data as json.Unmarshal
// would, and reports whether it could; on false c holds partial results
// and the caller decodes data with encoding/json instead. span, if not
// nil, learns where the text fields of the chunk's deltas are.
func scanChunk(sc *protocol.Scanner, data []byte, c *oaChunk, span *textSpan) bool {
	sc.Reset(data)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "choices":
			sc.Once(&seen, 1)
			if sc.Null() {
				c.Choices = nil
				continue
			}
			scanChoices(sc, c, span)
		case "usage":
			sc.Once(&seen, 2)
			if !sc.Null() {
				c.Usage = new(oaUsage)
				scanUsage(sc, c.Usage)
			}
		case "error":
			sc.Once(&seen, 4)
			if !sc.Null() {
				sc.Fail() // an error frame: rare, and read by the decoder
			}
		default:
			sc.Unknown(key, replyKeys...)
		}
	}
	return sc.Done()
}

func scanChoices(sc *protocol.Scanner, c *oaChunk, span *textSpan) {
	if !sc.Open('[') {
		return
	}
	for first := true; sc.More(']', first); first = false {
		c.Choices = append(c.Choices, oaChunkChoice{})
		if sc.Null() {
			continue // null leaves the element as it is: empty
		}
		ch := &c.Choices[len(c.Choices)-1]
		if !sc.Open('{') {
			return
		}
		var seen uint32
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "index":
				sc.Once(&seen, 1)
				if !sc.Null() {
					ch.Index = sc.Int()
				}
			case "delta":
				sc.Once(&seen, 2)
				if !sc.Null() {
					scanDelta(sc, &ch.Delta, span)
				}
			case "finish_reason":
				sc.Once(&seen, 4)
				ch.FinishReason = sc.OptString()
			default:
				sc.Unknown(key, chunkChoiceKeys...)
			}
		}
	}
}

// textSpan is what scanDelta saw of a delta's text fields: how many were
// strings (not null), and the kind and place of the last.
type textSpan struct {
	n       int
	kind    textKind
	at, end int // the string's quotes: data[at] and data[end-1]
}

type textKind uint8

const (
	textNone textKind = iota
	textContent
	textReasoningContent
	textReasoning
	textRefusal
)

// text reads a text field's string, noting it in span, or null (false).
func text(sc *protocol.Scanner, span *textSpan, kind textKind) (string, bool) {
	if sc.Null() {
		return "", false
	}
	sc.Peek() // past white space
	at := sc.Pos()
	t := sc.String()
	if span != nil {
		span.n++
		span.kind, span.at, span.end = kind, at, sc.Pos()
	}
	return t, true
}

// optText reads a text field into what a *string field gets.
func optText(sc *protocol.Scanner, span *textSpan, kind textKind) *string {
	t, ok := text(sc, span, kind)
	if !ok {
		return nil
	}
	return &t
}

func scanDelta(sc *protocol.Scanner, d *oaDelta, span *textSpan) {
	scanMessage(sc, (*oaRespMessage)(d), span)
}

// scanOptInt reads an integer or null (which leaves the field alone).
func scanOptInt(sc *protocol.Scanner, n *int) {
	if !sc.Null() {
		*n = sc.Int()
	}
}

// chunkTemplate is the last chunk the scanner read, when it was a plain
// text delta: one choice, index 0, whose delta holds one text field as a
// string (content, reasoning_content or reasoning), no finish reason, no
// usage. prefix is the chunk up to that string and suffix what follows it.
//
// A stream's text chunks usually differ only in that string, and a chunk
// that does — the same prefix, one JSON string, the same suffix — decodes
// to the template's chunk with the new text: the scanner reads the same
// bytes up to the string in the same way, and after it, from the same
// state, the same bytes again. So only the string is read (and checked as
// the scanner checks any string); anything else is scanned in full.
type chunkTemplate struct {
	kind           textKind // textNone: no template
	prefix, suffix []byte   // in buf
	buf            []byte
}

// set makes data, just scanned into c, the template if it is a plain text
// delta.
func (t *chunkTemplate) set(data []byte, c *oaChunk, span *textSpan) {
	t.kind = textNone
	if span.n != 1 || span.kind == textRefusal || c.Error != nil || c.Usage != nil || len(c.Choices) != 1 {
		return
	}
	if ch := &c.Choices[0]; ch.Index != 0 || ch.FinishReason != nil || ch.Delta.ToolCalls != nil {
		return
	}
	t.kind = span.kind
	t.buf = append(append(t.buf[:0], data[:span.at]...), data[span.end:]...)
	t.prefix, t.suffix = t.buf[:span.at], t.buf[span.at:]
}

// match reports whether data is the template's chunk with another text,
// and returns that text.
func (t *chunkTemplate) match(sc *protocol.Scanner, data []byte) (string, bool) {
	p, q := len(t.prefix), len(data)-len(t.suffix)
	if t.kind == textNone || q-p < 2 || !bytes.HasPrefix(data, t.prefix) || !bytes.HasSuffix(data, t.suffix) {
		return "", false
	}
	sc.Reset(data[p:q])
	text := sc.String()
	return text, sc.Done()
}

// Reading a whole (non-streaming) reply with protocol.Scanner.
//
// A reply is read once per call, and reading it with the v1 package's
// reflection was ~3% of a non-streaming call's CPU at saturation
// (bench/RESULTS.md, "A non-streaming call without
// reflection"). scanReply reads the fields oaResponse has
// and skips the rest, filling the reply as jsonv1.Unmarshal would; tool
// calls, content sent as an array of parts, error bodies and anything else
// it does not decide the same way are left to the decoder
// (FuzzScanReply checks the two agree).

// finishReasons are the finish reasons a reply repeats: read without
// allocating.
var finishReasons = []string{"stop", "length", "tool_calls", "content_filter", "function_call"}

// scanReply fills r, which is zero, from data as jsonv1.Unmarshal would,
// and reports whether it could; on false r holds partial results and the
// caller decodes data into a zero oaResponse instead.
func scanReply(sc *protocol.Scanner, data []byte, r *oaResponse) bool {
	sc.Reset(data)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "choices":
			sc.Once(&seen, 1)
			if !sc.Null() {
				scanReplyChoices(sc, r)
			}
		case "usage":
			sc.Once(&seen, 2)
			if !sc.Null() {
				r.Usage = new(oaUsage)
				scanUsage(sc, r.Usage)
			}
		case "error":
			sc.Once(&seen, 4)
			if !sc.Null() {
				sc.Fail() // an error body: rare, and read by the decoder
			}
		default:
			sc.Unknown(key, replyKeys...)
		}
	}
	return sc.Done()
}

func scanReplyChoices(sc *protocol.Scanner, r *oaResponse) {
	if !sc.Open('[') {
		return
	}
	r.Choices = []oaChoice{} // [] is an empty list, not nil
	for first := true; sc.More(']', first); first = false {
		r.Choices = append(r.Choices, oaChoice{})
		if sc.Null() {
			continue // null leaves the element as it is: empty
		}
		ch := &r.Choices[len(r.Choices)-1]
		if !sc.Open('{') {
			return
		}
		var seen uint32
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "message":
				sc.Once(&seen, 1)
				if !sc.Null() {
					scanMessage(sc, &ch.Message, nil)
				}
			case "finish_reason":
				sc.Once(&seen, 2)
				if !sc.Null() { // null leaves the string as it is
					ch.FinishReason = sc.Word(finishReasons)
				}
			default:
				sc.Unknown(key, choiceKeys...)
			}
		}
	}
}

// scanMessage reads a reply's message or a chunk's delta (span: nil for a
// message).
func scanMessage(sc *protocol.Scanner, m *oaRespMessage, span *textSpan) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "content":
			sc.Once(&seen, 1)
			if t, ok := text(sc, span, textContent); ok { // an array of parts fails here
				m.Content = oaText(t)
			}
		case "reasoning_content":
			sc.Once(&seen, 2)
			m.ReasoningContent = optText(sc, span, textReasoningContent)
		case "reasoning":
			sc.Once(&seen, 4)
			m.Reasoning = optText(sc, span, textReasoning)
		case "refusal":
			sc.Once(&seen, 8)
			m.Refusal = optText(sc, span, textRefusal)
		case "tool_calls":
			sc.Once(&seen, 16)
			switch {
			case sc.Null():
			case sc.Peek() == '[':
				// An empty list, as some compatible servers send with
				// every reply, decodes to an empty slice; tool calls are
				// read by the decoder.
				sc.Open('[')
				if sc.More(']', true) {
					sc.Fail()
				}
				m.ToolCalls = []oaRespToolCall{}
			default:
				sc.Fail()
			}
		default:
			sc.Unknown(key, messageKeys...)
		}
	}
}

// scanUsage reads a reply's or a chunk's usage, its details included
// (OpenAI sends them with every reply).
func scanUsage(sc *protocol.Scanner, u *oaUsage) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "prompt_tokens":
			sc.Once(&seen, 1)
			scanOptInt(sc, &u.PromptTokens)
		case "completion_tokens":
			sc.Once(&seen, 2)
			scanOptInt(sc, &u.CompletionTokens)
		case "prompt_tokens_details":
			sc.Once(&seen, 4)
			if sc.Null() {
				continue
			}
			u.PromptTokensDetails = new(struct {
				CachedTokens     int `json:"cached_tokens"`
				CacheWriteTokens int `json:"cache_write_tokens"`
			})
			scanInts(sc, promptDetails, &u.PromptTokensDetails.CachedTokens, &u.PromptTokensDetails.CacheWriteTokens)
		case "completion_tokens_details":
			sc.Once(&seen, 8)
			if sc.Null() {
				continue
			}
			u.CompletionTokensDetails = new(struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			})
			scanInts(sc, completionDetails, &u.CompletionTokensDetails.ReasoningTokens)
		default:
			sc.Unknown(key, usageKeys...)
		}
	}
}

// The members each scanner reads, named to Unknown so that a key differing
// only in case, which the decoder would take for one of them, fails the
// scan. TestScan_KnowsEveryMember checks them against the types' JSON
// names, so a member added to a type is not skipped by its scanner.
var (
	replyKeys         = []string{"choices", "usage", "error"} // a reply's and a chunk's
	choiceKeys        = []string{"message", "finish_reason"}
	chunkChoiceKeys   = []string{"index", "delta", "finish_reason"}
	messageKeys       = []string{"content", "reasoning_content", "reasoning", "refusal", "tool_calls"}
	usageKeys         = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}
	promptDetails     = []string{"cached_tokens", "cache_write_tokens"}
	completionDetails = []string{"reasoning_tokens"}
)

// scanInts reads an object whose wanted members are the integers keys
// name, into ns (one for each key, in order), skipping the others.
func scanInts(sc *protocol.Scanner, keys []string, ns ...*int) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		key := sc.Key()
		i := slices.Index(keys, string(key))
		if i < 0 {
			sc.Unknown(key, keys...)
			continue
		}
		sc.Once(&seen, 1<<i)
		scanOptInt(sc, ns[i])
	}
}
