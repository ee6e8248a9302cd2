package server

import "github.com/svcgw/svcgw/llm"

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

// boundFields names, per surface, the request fields the bounds are about,
// so the error's param is the caller's own field name, and what the caller
// calls one entry of its conversation. Indices are left out: decoding
// merges and moves turns, so ours would not match theirs.
type boundFields struct{ messages, system, tools, schema, turn string }

func fieldsOf(sf llm.Surface) boundFields {
	switch sf {
	case llm.SurfaceMessages:
		return boundFields{"messages", "system", "tools", "output_config.format.schema", "messages"}
	case llm.SurfaceGenContent:
		return boundFields{"contents", "systemInstruction", "tools", "generationConfig.responseSchema", "contents"}
	case llm.SurfaceResponses:
		return boundFields{"input", "instructions", "tools", "text.format.schema", "input items"}
	}
	return boundFields{"messages", "messages", "tools", "response_format.json_schema.schema", "messages"}
}

// check returns an invalid_request error for the first bound req exceeds.
func (b Bounds) check(sf llm.Surface, req *llm.Request) error {
	f := fieldsOf(sf)
	if n := len(req.Messages); n > b.MaxMessages {
		return llm.InvalidParam(f.messages, "the request has %d messages; the limit is %d", n, b.MaxMessages)
	}
	if n := len(req.Tools); n > b.MaxTools {
		return llm.InvalidParam(f.tools, "the request defines %d tools; the limit is %d", n, b.MaxTools)
	}
	if n := len(req.System); n > b.MaxParts {
		return llm.InvalidParam(f.system, "the system prompt has %d content parts; the limit is %d", n, b.MaxParts)
	}
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		if len(parts) > b.MaxParts {
			if turns := req.Messages[i].Turns; turns > 1 {
				return llm.InvalidParam(f.messages, "%d consecutive %s of one role hold %d content parts between them; "+
					"consecutive %s of one role count as one turn, and the limit is %d content parts per turn",
					turns, f.turn, len(parts), f.turn, b.MaxParts)
			}
			return llm.InvalidParam(f.messages, "a message has %d content parts; the limit is %d per message", len(parts), b.MaxParts)
		}
		for j := range parts {
			if tr := parts[j].ToolResult; tr != nil && len(tr.Content) > b.MaxParts {
				return llm.InvalidParam(f.messages, "a tool result has %d content parts; the limit is %d", len(tr.Content), b.MaxParts)
			}
		}
	}
	for i := range req.Tools {
		if n := len(req.Tools[i].Parameters); n > b.MaxSchemaBytes {
			return llm.InvalidParam(f.tools, "the parameter schema of tool %q is %d bytes; the limit is %d bytes per schema", req.Tools[i].Name, n, b.MaxSchemaBytes)
		}
	}
	if rf := req.ResponseFormat; rf != nil && len(rf.Schema) > b.MaxSchemaBytes {
		return llm.InvalidParam(f.schema, "the response schema is %d bytes; the limit is %d bytes", len(rf.Schema), b.MaxSchemaBytes)
	}
	return nil
}
