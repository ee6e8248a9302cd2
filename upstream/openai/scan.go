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
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "choices":
			sc.Once(&seen, 1)
			if sc.Null() {
				c.Choices = nil
				continue
			}
			scanChoices(sc, c)
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
					scanDelta(sc, &ch.Delta)
				}
			case "finish_reason":
				sc.Once(&seen, 4)
				ch.FinishReason = sc.OptString()
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
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "content":
			sc.Once(&seen, 1)
			if !sc.Null() {
				d.Content = oaText(sc.String()) // an array of parts fails here
			}
		case "reasoning_content":
			sc.Once(&seen, 2)
			d.ReasoningContent = sc.OptString()
		case "reasoning":
			sc.Once(&seen, 4)
			d.Reasoning = sc.OptString()
		case "refusal":
			sc.Once(&seen, 8)
			d.Refusal = sc.OptString()
		case "tool_calls":
			sc.Once(&seen, 16)
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
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "prompt_tokens":
			sc.Once(&seen, 1)
			scanOptInt(sc, &u.PromptTokens)
		case "completion_tokens":
			sc.Once(&seen, 2)
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

// scanOptInt reads an integer or null (which leaves the field alone).
func scanOptInt(sc *protocol.Scanner, n *int) {
	if !sc.Null() {
		*n = sc.Int()
	}
}
