package anthropic

import "github.com/svcgw/svcgw/upstream/internal/protocol"

// Reading a stream event with protocol.Scanner.
//
// A messages stream is mostly content_block_delta events carrying a few
// words of text, thinking or tool input; decoding each through
// encoding/json's reflection was most of what relaying one cost. The
// scanner reads the fields anEvent has straight from the text, filling it
// exactly as json.Unmarshal would: type, index and the delta's strings.
// The events that carry a message, a content block, usage or an error
// (message_start, content_block_start, message_delta, error: one or two a
// block or a stream) and anything else it does not decide the same way
// are left to encoding/json (FuzzScanEvent checks the two agree).

// scanEvent fills e, which is empty, from data as json.Unmarshal would,
// pointing e.Delta at d when the event has one, and reports whether it
// could; on false e holds partial results and the caller decodes data
// with encoding/json instead.
func scanEvent(sc *protocol.Scanner, data []byte, e *anEvent, d *anDelta) bool {
	sc.Reset(data)
	if !sc.Open('{') {
		return false
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		switch key := sc.Key(); string(key) {
		case "type":
			sc.Once(&seen, 1)
			if !sc.Null() {
				e.Type = sc.Word(eventTypes)
			}
		case "index":
			sc.Once(&seen, 2)
			if !sc.Null() {
				e.Index = sc.Int()
			}
		case "delta":
			sc.Once(&seen, 4)
			if !sc.Null() {
				*d = anDelta{}
				e.Delta = d
				scanDelta(sc, d)
			}
		case "message", "content_block", "usage", "error":
			// null leaves the field nil, as it is; anything else is one
			// of the rare frames the decoder reads.
			if !sc.Null() {
				sc.Fail()
			}
		default:
			sc.Unknown(key, "type", "index", "delta", "message", "content_block", "usage", "error")
		}
	}
	return sc.Done()
}

// eventTypes and deltaTypes are the type names the scanner reads without
// allocating.
var (
	eventTypes = []string{"content_block_delta", "content_block_stop", "ping", "message_stop"}
	deltaTypes = []string{"text_delta", "thinking_delta", "input_json_delta", "signature_delta"}
)

func scanDelta(sc *protocol.Scanner, d *anDelta) {
	if !sc.Open('{') {
		return
	}
	var seen uint32
	for first := true; sc.More('}', first); first = false {
		key := sc.Key()
		var f *string
		switch string(key) {
		case "type":
			sc.Once(&seen, 1)
			if !sc.Null() {
				d.Type = sc.Word(deltaTypes)
			}
			continue
		case "text":
			sc.Once(&seen, 2)
			f = &d.Text
		case "thinking":
			sc.Once(&seen, 4)
			f = &d.Thinking
		case "signature":
			sc.Once(&seen, 8)
			f = &d.Signature
		case "partial_json":
			sc.Once(&seen, 16)
			f = &d.PartialJSON
		case "stop_reason":
			sc.Once(&seen, 32)
			f = &d.StopReason
		case "stop_sequence":
			sc.Once(&seen, 64)
			d.StopSequence = sc.OptString()
			continue
		default:
			sc.Unknown(key, "type", "text", "thinking", "signature", "partial_json", "stop_reason", "stop_sequence")
			continue
		}
		if !sc.Null() { // null leaves a string field alone
			*f = sc.String()
		}
	}
}
