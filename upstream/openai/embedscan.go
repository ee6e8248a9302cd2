package openai

import (
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// Reading an embeddings reply with protocol.Scanner.
//
// A reply is mostly floats: 1,536 or 3,072 of them a vector, up to
// embedBatch vectors. The decoder reads an embedding through
// oaVector.UnmarshalJSON, which has it scan the vector's text twice (once
// to find its end, once to decode it), and decodes each float with
// reflection; the scanner reads the fields oaEmbedResponse has straight
// from the text, each float with strconv.ParseFloat as encoding/json does
// (BenchmarkEmbedReply). Anything it does not decide as the decoder would
// (an error object, keys that fold, a repeated key) is left to the
// decoder; FuzzScanEmbedReply checks that the two agree.
//
// An embedding in the caller's form (wire: an array of numbers for
// llm.WireOpenAIFloats, base64 for llm.WireOpenAIBase64) is not parsed:
// its text is checked and kept (oaEmbedItem.text), to be passed through
// (llm.Embeddings.Text). The check fails the scan wherever the decoder
// would fail the reply, so a reply it refuses is the decoder's to refuse.

var embedReplyKeys = []string{"data", "usage", "error"}

// scanEmbedReply fills r, which is empty, from raw as jsonv1.Unmarshal
// would, and reports whether it could.
func scanEmbedReply(sc *protocol.Scanner, raw []byte, r *oaEmbedResponse, wire llm.EmbedWire) bool {
	sc.Reset(raw)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "data":
			sc.Once(&seen, 1)
			if sc.Null() {
				r.Data = nil
				continue
			}
			scanEmbedItems(sc, r, wire)
		case "usage":
			sc.Once(&seen, 2)
			if !sc.Null() {
				r.Usage = new(oaEmbedUsage)
				scanEmbedUsage(sc, r.Usage)
			}
		case "error":
			sc.Once(&seen, 4)
			if !sc.Null() {
				sc.Fail() // an error body: rare, and read by the decoder
			}
		default:
			sc.Unknown(key, embedReplyKeys...)
		}
	}
	return sc.Done()
}

var embedItemKeys = []string{"index", "embedding"}

func scanEmbedItems(sc *protocol.Scanner, r *oaEmbedResponse, wire llm.EmbedWire) {
	var scratch []byte // CheckBase64Vector's
	if !sc.Open('[') {
		return
	}
	r.Data = []oaEmbedItem{} // [] is an empty list, not none
	for first := true; sc.More(']', first); first = false {
		r.Data = append(r.Data, oaEmbedItem{})
		if sc.Null() {
			continue // null leaves the element as it is: empty
		}
		it := &r.Data[len(r.Data)-1]
		if !sc.Open('{') {
			return
		}
		var seen uint32
		for first := true; sc.More('}', first); first = false {
			switch key := sc.Key(); string(key) {
			case "index":
				sc.Once(&seen, 1)
				if !sc.Null() {
					n := sc.Int()
					it.Index = &n
				}
			case "embedding":
				sc.Once(&seen, 2)
				it.Embedding, it.text, it.count, scratch = scanVector(sc, wire, scratch)
			default:
				sc.Unknown(key, embedItemKeys...)
			}
		}
	}
}

// scanVector reads an embedding: an array of floats, base64 text, or
// null. One in the form wire is returned as its text, checked, with the
// count of its values; any other as values.
func scanVector(sc *protocol.Scanner, wire llm.EmbedWire, scratch []byte) (v oaVector, text []byte, count int, _ []byte) {
	switch sc.Peek() {
	case 'n':
		sc.Null()
		return nil, nil, 0, scratch
	case '"':
		if wire == llm.WireOpenAIBase64 {
			text = sc.RawString()
			n, s, err := llm.CheckBase64Vector(text, scratch)
			if err != nil || n == 0 {
				sc.Fail()
			}
			return nil, text, n, s
		}
		v, err := protocol.DecodeBase64Vector(sc.String())
		if err != nil {
			sc.Fail()
		}
		return v, nil, 0, scratch
	case '[':
		if wire == llm.WireOpenAIFloats {
			text, count = sc.Float32ArrayText()
			if count == 0 {
				// [] is an empty vector, which the decoder reads as one
				// and the checks refuse: read it as the decoder does.
				return oaVector{}, nil, 0, scratch
			}
			return nil, text, count, scratch
		}
	}
	return protocol.ScanFloats(sc), nil, 0, scratch
}

var embedUsageKeys = []string{"prompt_tokens"}

func scanEmbedUsage(sc *protocol.Scanner, u *oaEmbedUsage) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "prompt_tokens":
			sc.Once(&seen, 1)
			if !sc.Null() {
				u.PromptTokens = sc.Int()
			}
		default:
			sc.Unknown(key, embedUsageKeys...)
		}
	}
}
