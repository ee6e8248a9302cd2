package openai

import "github.com/svcgw/svcgw/upstream/internal/protocol"

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
// and the caller decodes data with encoding/json instead.
func scanChunk(sc *protocol.Scanner, data []byte, c *oaChunk) bool {
	sc.Reset(data)
	if !sc.Open('{') {
		return false
	}
	var seen uint8
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "choices":
			seen = onceIn(sc, seen, 1)
			if sc.Null() {
				c.Choices = nil
				continue
			}
			scanChoices(sc, c)
		case "usage":
			seen = onceIn(sc, seen, 2)
			if !sc.Null() {
				c.Usage = new(oaUsage)
				scanUsage(sc, c.Usage)
			}
		case "error":
			seen = onceIn(sc, seen, 4)
			if !sc.Null() {
				sc.Fail() // an error frame: rare, and read by the decoder
			}
		default:
			sc.Unknown(key, "choices", "usage", "error")
		}
	}
	return sc.Done()
}

func scanChoices(sc *protocol.Scanner, c *oaChunk) {
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
		var seen uint8
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "index":
				seen = onceIn(sc, seen, 1)
				if !sc.Null() {
					ch.Index = sc.Int()
				}
			case "delta":
				seen = onceIn(sc, seen, 2)
				if !sc.Null() {
					scanDelta(sc, &ch.Delta)
				}
			case "finish_reason":
				seen = onceIn(sc, seen, 4)
				ch.FinishReason = scanOptString(sc)
			default:
				sc.Unknown(key, "index", "delta", "finish_reason")
			}
		}
	}
}

func scanDelta(sc *protocol.Scanner, d *oaDelta) {
	if !sc.Open('{') {
		return
	}
	var seen uint8
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "content":
			seen = onceIn(sc, seen, 1)
			if !sc.Null() {
				d.Content = oaText(sc.String()) // an array of parts fails here
			}
		case "reasoning_content":
			seen = onceIn(sc, seen, 2)
			d.ReasoningContent = scanOptString(sc)
		case "reasoning":
			seen = onceIn(sc, seen, 4)
			d.Reasoning = scanOptString(sc)
		case "refusal":
			seen = onceIn(sc, seen, 8)
			d.Refusal = scanOptString(sc)
		case "tool_calls":
			seen = onceIn(sc, seen, 16)
			if !sc.Null() {
				sc.Fail() // tool-call deltas are read by the decoder
			}
		default:
			sc.Unknown(key, "content", "reasoning_content", "reasoning", "refusal", "tool_calls")
		}
	}
}

func scanUsage(sc *protocol.Scanner, u *oaUsage) {
	if !sc.Open('{') {
		return
	}
	var seen uint8
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "prompt_tokens":
			seen = onceIn(sc, seen, 1)
			scanOptInt(sc, &u.PromptTokens)
		case "completion_tokens":
			seen = onceIn(sc, seen, 2)
			scanOptInt(sc, &u.CompletionTokens)
		case "prompt_tokens_details", "completion_tokens_details":
			// Rare in streams of the servers that send usage this way,
			// and nested: left to the decoder.
			sc.Fail()
		default:
			sc.Unknown(key, "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")
		}
	}
}

// onceIn marks bit in seen, failing the scan for a repeated key:
// encoding/json decodes a repeated key again over the first, which the
// scanner does not imitate.
func onceIn(sc *protocol.Scanner, seen, bit uint8) uint8 {
	if seen&bit != 0 {
		sc.Fail()
	}
	return seen | bit
}

// scanOptString reads a string or null into a *string field.
func scanOptString(sc *protocol.Scanner) *string {
	if sc.Null() {
		return nil
	}
	s := sc.String()
	return &s
}

// scanOptInt reads an integer or null (which leaves the field alone).
func scanOptInt(sc *protocol.Scanner, n *int) {
	if !sc.Null() {
		*n = sc.Int()
	}
}
