package llm

import (
	"bytes"
	"encoding/json"
)

// CompactJSON returns raw JSON without insignificant whitespace: the form
// of the raw JSON a canonical request carries (tool parameters and
// arguments, response schemas), so that equal values compare and hash
// (prompt-cache prefixes) equal however the caller spaced them. raw that is
// not JSON is returned as it is.
func CompactJSON(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
