package protocol

import (
	"math"
	"strconv"
)

// Appending JSON by hand, byte for byte as EncodeJSON (encoding/json
// without HTML escaping) writes it: for a vendor's request encoder, which
// writes the usual request without reflection and leaves anything else to
// EncodeJSON (bench/RESULTS.md, "A non-streaming call without
// reflection"). Strings are written by
// llm.AppendJSONString.

// AppendJSONFloat appends f as encoding/json writes a float64 (as ES6
// converts a number to a string), and reports false for NaN and the
// infinities, which encoding/json refuses.
func AppendJSONFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}
