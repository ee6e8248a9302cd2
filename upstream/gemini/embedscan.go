package gemini

import "github.com/svcgw/svcgw/upstream/internal/protocol"

// Reading an embeddings reply with protocol.Scanner: the floats of a batch
// of 100 vectors of 3,072 are most of what a call's CPU goes to, and the
// scanner reads them without reflection (as the openai backend's
// scanEmbedReply does). Anything it does not decide as jsonv1 would (an
// error object, keys that fold, a repeated key) is left to the decoder;
// FuzzScanEmbedReply checks that the two agree.
//
// For a caller in Gemini's shape (text), values are not parsed: their text
// is checked and kept (llm.JSONScanner.Float32ArrayText), failing the scan
// wherever the decoder would fail the reply.

var embedReplyKeys = []string{"embedding", "embeddings", "usageMetadata", "error"}

// scanEmbedReply fills r, which is empty, from raw as jsonv1.Unmarshal
// would, and reports whether it could.
func scanEmbedReply(sc *protocol.Scanner, raw []byte, r *gmEmbedResponse, text bool) bool {
	sc.Reset(raw)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "embedding":
			sc.Once(&seen, 1)
			if !sc.Null() {
				r.Embedding = new(gmEmbedding)
				scanEmbedding(sc, r.Embedding, text)
			}
		case "embeddings":
			sc.Once(&seen, 2)
			if sc.Null() || !sc.Open('[') {
				continue
			}
			r.Embeddings = []gmEmbedding{}
			for first := true; sc.More(']', first); first = false {
				r.Embeddings = append(r.Embeddings, gmEmbedding{})
				if !sc.Null() {
					scanEmbedding(sc, &r.Embeddings[len(r.Embeddings)-1], text)
				}
			}
		case "usageMetadata":
			sc.Once(&seen, 4)
			if !sc.Null() {
				r.UsageMetadata = new(gmEmbedUsage)
				scanEmbedUsage(sc, r.UsageMetadata)
			}
		case "error":
			sc.Once(&seen, 8)
			if !sc.Null() {
				sc.Fail() // an error object: rare, and read by the decoder
			}
		default:
			sc.Unknown(key, embedReplyKeys...)
		}
	}
	return sc.Done()
}

var embeddingKeys = []string{"values"}

func scanEmbedding(sc *protocol.Scanner, e *gmEmbedding, text bool) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "values":
			sc.Once(&seen, 1)
			if text && sc.Peek() == '[' {
				if e.text, e.count = sc.Float32ArrayText(); e.count == 0 {
					e.text, e.Values = nil, []float32{} // [], read as the decoder does
				}
				continue
			}
			e.Values = protocol.ScanFloats(sc)
		default:
			sc.Unknown(key, embeddingKeys...)
		}
	}
}

var embedUsageKeys = []string{"promptTokenCount"}

func scanEmbedUsage(sc *protocol.Scanner, u *gmEmbedUsage) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "promptTokenCount":
			sc.Once(&seen, 1)
			if !sc.Null() {
				u.PromptTokenCount = sc.Int()
			}
		default:
			sc.Unknown(key, embedUsageKeys...)
		}
	}
}
