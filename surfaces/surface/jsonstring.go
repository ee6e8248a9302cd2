package surface

import "github.com/svcgw/svcgw/llm"

// AppendString appends s to dst as a JSON string, byte for byte as
// encoding/json writes it, with HTML escaping when escapeHTML is set
// (llm.AppendJSONString, shared with the upstream request encoders).
func AppendString(dst []byte, s string, escapeHTML bool) []byte {
	return llm.AppendJSONString(dst, s, escapeHTML)
}
