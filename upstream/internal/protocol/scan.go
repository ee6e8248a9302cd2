package protocol

import "github.com/svcgw/svcgw/llm"

// Scanner reads the few fields a stream frame carries straight from its
// JSON text (llm.JSONScanner, shared with the surfaces' request decoders):
// a vendor's decoder uses it for the frames it knows the shape of and
// falls back to its FrameDecoder for anything else.
type Scanner = llm.JSONScanner
