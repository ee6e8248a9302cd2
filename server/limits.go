package server

import (
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// Default request bounds (see Bounds).
const (
	DefaultMaxMessages    = 10000
	DefaultMaxParts       = 1000
	DefaultMaxTools       = 512
	DefaultMaxSchemaBytes = 256 << 10
)

// Bounds limit the shape of a decoded inference request. A request beyond
// one is refused with 400 invalid_request naming the bound and the field,
// in the caller's native envelope. Only the body size (Options.MaxBodyBytes)
// is a 413: it is the one limit met before the request is understood, and
// the other bounds are about what the request says rather than how many
// bytes it took to say it. A zero field takes its default.
type Bounds struct {
	// MaxMessages bounds the conversation turns (messages, contents,
	// input items); default 10,000.
	MaxMessages int
	// MaxParts bounds the content parts of one message, of the system
	// prompt and of one tool result; default 1,000.
	MaxParts int
	// MaxTools bounds the tool (function) definitions; default 512.
	MaxTools int
	// MaxSchemaBytes bounds each JSON Schema: every tool's parameters and
	// the response schema; default 256 KiB.
	MaxSchemaBytes int
}

func (b Bounds) withDefaults() Bounds {
	if b.MaxMessages <= 0 {
		b.MaxMessages = DefaultMaxMessages
	}
	if b.MaxParts <= 0 {
		b.MaxParts = DefaultMaxParts
	}
	if b.MaxTools <= 0 {
		b.MaxTools = DefaultMaxTools
	}
	if b.MaxSchemaBytes <= 0 {
		b.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	return b
}

// check returns an invalid_request error for the first bound req exceeds,
// naming the caller's field (f, the surface's words for the fields).
func (b Bounds) check(f surface.Fields, req *llm.Request) error {
	if n := len(req.Messages); n > b.MaxMessages {
		return llm.InvalidParam(f.Messages, "the request has %d messages; the limit is %d", n, b.MaxMessages)
	}
	if n := len(req.Tools); n > b.MaxTools {
		return llm.InvalidParam(f.Tools, "the request defines %d tools; the limit is %d", n, b.MaxTools)
	}
	if n := len(req.System); n > b.MaxParts {
		return llm.InvalidParam(f.System, "the system prompt has %d content parts; the limit is %d", n, b.MaxParts)
	}
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		if len(parts) > b.MaxParts {
			if turns := req.Messages[i].Turns; turns > 1 {
				return llm.InvalidParam(f.Messages, "%d consecutive %s of one role hold %d content parts between them; "+
					"consecutive %s of one role count as one turn, and the limit is %d content parts per turn",
					turns, f.Turn, len(parts), f.Turn, b.MaxParts)
			}
			return llm.InvalidParam(f.Messages, "a message has %d content parts; the limit is %d per message", len(parts), b.MaxParts)
		}
		for j := range parts {
			if tr := parts[j].ToolResult; tr != nil && len(tr.Content) > b.MaxParts {
				return llm.InvalidParam(f.Messages, "a tool result has %d content parts; the limit is %d", len(tr.Content), b.MaxParts)
			}
		}
	}
	for i := range req.Tools {
		if n := len(req.Tools[i].Parameters); n > b.MaxSchemaBytes {
			return llm.InvalidParam(f.Tools, "the parameter schema of tool %q is %d bytes; the limit is %d bytes per schema", req.Tools[i].Name, n, b.MaxSchemaBytes)
		}
	}
	if rf := req.ResponseFormat; rf != nil && len(rf.Schema) > b.MaxSchemaBytes {
		return llm.InvalidParam(f.Schema, "the response schema is %d bytes; the limit is %d bytes", len(rf.Schema), b.MaxSchemaBytes)
	}
	return nil
}
