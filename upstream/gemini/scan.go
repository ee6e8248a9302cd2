package gemini

import "github.com/svcgw/svcgw/upstream/internal/protocol"

// Reading a stream chunk with protocol.Scanner.
//
// A streamGenerateContent stream is chunks of one candidate whose content
// is a text part or two, with the usage so far on each; decoding each
// through encoding/json's reflection was most of what relaying one cost.
// The scanner reads the fields gmResponse has straight from the text and
// skips the rest (modelVersion, responseId, safety ratings, token
// details), filling the chunk exactly as json.Unmarshal would. Function
// calls, inline data, prompt feedback, error objects, a chunk wrapped in
// an array and anything else it does not decide the same way are left to
// encoding/json (FuzzScanChunk checks the two agree).

// scanBufs is a stream's scanner and the values a scanned chunk points
// at, reused from chunk to chunk (the stream keeps none of them: it
// copies the usage).
type scanBufs struct {
	sc      protocol.Scanner
	cands   []gmCandidate
	content []gmContent
	usage   gmUsage
}

// chunk fills r, which is empty, from data as json.Unmarshal would, and
// reports whether it could; on false r holds partial results and the
// caller decodes data with encoding/json instead.
func (b *scanBufs) chunk(data []byte, r *gmResponse) bool {
	sc := &b.sc
	sc.Reset(data)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "candidates":
			sc.Once(&seen, 1)
			if !sc.Null() {
				b.candidates(r)
			}
		case "usageMetadata":
			sc.Once(&seen, 2)
			if !sc.Null() {
				b.usage = gmUsage{}
				r.UsageMetadata = &b.usage
				scanUsage(sc, &b.usage)
			}
		case "promptFeedback", "error":
			if !sc.Null() {
				sc.Fail() // rare, and read by the decoder
			}
		default:
			sc.Unknown(key, "candidates", "usageMetadata", "promptFeedback", "error")
		}
	}
	return sc.Done()
}

func (b *scanBufs) candidates(r *gmResponse) {
	sc := &b.sc
	if !sc.Open('[') {
		return
	}
	r.Candidates = b.cands[:0]
	b.content = b.content[:0]
	for first := true; sc.More(']', first); first = false {
		r.Candidates = append(r.Candidates, gmCandidate{})
		if sc.Null() {
			continue
		}
		c := &r.Candidates[len(r.Candidates)-1]
		if !sc.Open('{') {
			return
		}
		var seen uint32
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "content":
				sc.Once(&seen, 1)
				if !sc.Null() {
					c.Content = b.newContent()
					scanContent(sc, c.Content)
				}
			case "finishReason":
				sc.Once(&seen, 2)
				if !sc.Null() {
					c.FinishReason = sc.Word(finishReasons)
				}
			case "index":
				sc.Once(&seen, 4)
				if !sc.Null() {
					c.Index = sc.Int()
				}
			default:
				sc.Unknown(key, "content", "finishReason", "index")
			}
		}
	}
	b.cands = r.Candidates
}

// newContent returns an empty gmContent from the reused ones, keeping the
// backing array of its parts.
func (b *scanBufs) newContent() *gmContent {
	if len(b.content) == cap(b.content) {
		b.content = append(b.content, gmContent{})
	} else {
		b.content = b.content[:len(b.content)+1]
	}
	c := &b.content[len(b.content)-1]
	*c = gmContent{Parts: c.Parts[:0]}
	return c
}

// finishReasons and roles are the words the scanner reads without
// allocating.
var (
	finishReasons = []string{"STOP", "MAX_TOKENS"}
	roles         = []string{"model"}
)

func scanContent(sc *protocol.Scanner, c *gmContent) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "role":
			sc.Once(&seen, 1)
			if !sc.Null() {
				c.Role = sc.Word(roles)
			}
		case "parts":
			sc.Once(&seen, 2)
			if sc.Null() {
				c.Parts = nil
				continue
			}
			scanParts(sc, c)
		default:
			sc.Unknown(key, "role", "parts")
		}
	}
}

func scanParts(sc *protocol.Scanner, c *gmContent) {
	if !sc.Open('[') {
		return
	}
	for first := true; sc.More(']', first); first = false {
		c.Parts = append(c.Parts, gmPart{})
		if sc.Null() {
			continue
		}
		p := &c.Parts[len(c.Parts)-1]
		if !sc.Open('{') {
			return
		}
		var seen uint32
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "text":
				sc.Once(&seen, 1)
				if !sc.Null() {
					p.Text = sc.String()
				}
			case "thought":
				sc.Once(&seen, 2)
				if !sc.Null() {
					p.Thought = sc.Bool()
				}
			case "thoughtSignature":
				sc.Once(&seen, 4)
				if !sc.Null() {
					p.ThoughtSignature = sc.String()
				}
			case "inlineData", "functionCall", "functionResponse":
				if !sc.Null() {
					sc.Fail() // read by the decoder
				}
			default:
				sc.Unknown(key, "text", "thought", "thoughtSignature", "inlineData", "functionCall", "functionResponse")
			}
		}
	}
}

func scanUsage(sc *protocol.Scanner, u *gmUsage) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		key := sc.Key()
		var n *int
		switch string(key) {
		case "promptTokenCount":
			sc.Once(&seen, 1)
			n = &u.PromptTokenCount
		case "candidatesTokenCount":
			sc.Once(&seen, 2)
			n = &u.CandidatesTokenCount
		case "thoughtsTokenCount":
			sc.Once(&seen, 4)
			n = &u.ThoughtsTokenCount
		case "cachedContentTokenCount":
			sc.Once(&seen, 8)
			n = &u.CachedContentTokenCount
		case "toolUsePromptTokenCount":
			sc.Once(&seen, 16)
			n = &u.ToolUsePromptTokenCount
		default:
			sc.Unknown(key, "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "cachedContentTokenCount", "toolUsePromptTokenCount")
			continue
		}
		if !sc.Null() {
			*n = sc.Int()
		}
	}
}
