package surface

import (
	"strconv"

	"github.com/svcgw/svcgw/llm"
)

// AppendString appends s to dst as a JSON string, byte for byte as
// encoding/json writes it, with HTML escaping when escapeHTML is set
// (llm.AppendJSONString, shared with the upstream request encoders).
func AppendString(dst []byte, s string, escapeHTML bool) []byte {
	return llm.AppendJSONString(dst, s, escapeHTML)
}

// AppendFloats appends v to dst as a JSON array of numbers, each the
// shortest decimal that reads back as the same float32 (as the vendors
// write an embedding).
func AppendFloats(dst []byte, v []float32) []byte {
	dst = append(dst, '[')
	for i, f := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendFloat(dst, float64(f), 'g', -1, 32)
	}
	return append(dst, ']')
}

// AppendVector appends vector i of e as a JSON array of numbers: its text
// as the upstream wrote it when e holds text (an array of numbers,
// checked, in the caller's form), else its values by AppendFloats.
func AppendVector(dst []byte, e *llm.Embeddings, i int) []byte {
	if e.Text != nil {
		return append(dst, e.Text[i]...)
	}
	return AppendFloats(dst, e.Vectors[i])
}

// EmbedText readies e to be written in the form wire: text in another
// form is turned into values (llm.Embeddings.Floats), which the router's
// checks make an error that does not happen.
func EmbedText(e *llm.Embeddings, wire llm.EmbedWire) error {
	if e.Text != nil && e.Wire != wire {
		return e.Floats()
	}
	return nil
}

// VectorsSize is about how long e's vectors are as JSON (at least as
// long): their text, or 16 bytes a value (the most a float32 takes:
// -1.2345678e-38), or base64 when b64; and per vector, room for its
// members.
func VectorsSize(e *llm.Embeddings, b64 bool, perVector int) int {
	n := 0
	for i := range e.Len() {
		switch {
		case e.Text != nil:
			n += len(e.Text[i])
		case b64:
			n += (len(e.Vectors[i])*4+2)/3*4 + 2
		default:
			n += len(e.Vectors[i])*16 + 2
		}
		n += perVector
	}
	return n
}
