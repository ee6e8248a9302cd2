package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// A vector's text passed through: an upstream's reply that is already in
// the form the caller asked for (an OpenAI-protocol upstream's float array
// or base64 to an OpenAI-shaped call that asked for it, a Gemini
// upstream's values to a Gemini-shaped call) reaches the caller as the
// upstream wrote it, checked but not parsed into floats and formatted
// again (docs/translation.md, "Embedding vectors"). The values are the
// caller's to receive unchanged anyway, and they tell the model apart far
// more precisely than the number formatting could.

// EmbedWire is a form an embeddings reply writes its vectors in.
type EmbedWire uint8

const (
	// WireNone is a caller's form no upstream writes: the reply is
	// written from the float32 values (Embeddings.Vectors).
	WireNone EmbedWire = iota
	// WireOpenAIFloats is an OpenAI-protocol embedding as a JSON array
	// of numbers (encoding_format "float").
	WireOpenAIFloats
	// WireOpenAIBase64 is an OpenAI-protocol embedding as the base64 of
	// its little-endian float32 values (encoding_format "base64").
	WireOpenAIBase64
	// WireGeminiValues is a Gemini ContentEmbedding's values: a JSON
	// array of numbers.
	WireGeminiValues
)

// Base64 reports whether w is base64 text (else a JSON array of numbers).
func (w EmbedWire) Base64() bool { return w == WireOpenAIBase64 }

// Len returns how many vectors e holds, as text or as values.
func (e *Embeddings) Len() int {
	if e.Text != nil {
		return len(e.Text)
	}
	return len(e.Vectors)
}

// Floats turns e's text, if it holds text, into float32 values (Vectors),
// each number parsed as encoding/json parses it into a float32, each
// base64 vector decoded: for a caller whose form is not the text's.
func (e *Embeddings) Floats() error {
	if e.Text == nil {
		return nil
	}
	vecs := make([][]float32, len(e.Text))
	for i, t := range e.Text {
		v, err := DecodeEmbedText(e.Wire, t)
		if err != nil {
			return fmt.Errorf("embedding %d: %w", i, err)
		}
		vecs[i] = v
	}
	e.Vectors, e.Text, e.Dims = vecs, nil, 0
	return nil
}

// DecodeEmbedText returns the float32 values of a vector's text in the
// form w: base64 of little-endian float32s, or a JSON array of numbers
// without white space (as Float32ArrayText returns it).
func DecodeEmbedText(w EmbedWire, t []byte) ([]float32, error) {
	if w.Base64() {
		b := make([]byte, base64.StdEncoding.DecodedLen(len(t)))
		n, err := base64.StdEncoding.Decode(b, t)
		if err != nil {
			return nil, fmt.Errorf("base64 embedding: %w", err)
		}
		if n%4 != 0 {
			return nil, errors.New("base64 embedding is not a whole number of float32 values")
		}
		v := make([]float32, n/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	if len(t) < 2 || t[0] != '[' || t[len(t)-1] != ']' {
		return nil, errors.New("an embedding's text is not an array")
	}
	t = t[1 : len(t)-1]
	v := []float32{}
	for len(t) > 0 {
		j := 0
		for j < len(t) && t[j] != ',' {
			j++
		}
		f, err := strconv.ParseFloat(string(t[:j]), 32)
		if err != nil {
			return nil, err
		}
		v = append(v, float32(f))
		if j == len(t) {
			break
		}
		t = t[j+1:]
	}
	return v, nil
}

// Float32ArrayText reads an array of numbers and returns its text with
// the white space left out (a slice of the input when there is none,
// else a copy) and how many numbers it holds, without parsing them: the
// numbers are checked, not converted. Each must be a JSON number (RFC 8259
// section 6) that is finite as a float32: text JSON holds no NaN or
// infinity, so only a number too large overflows, and the few that could
// (those with an exponent, or more than 38 digits before the point) are
// parsed to find out. Anything else (another value, a malformed or
// overflowing number) fails the scan, as encoding/json refuses it for a
// []float32.
func (s *JSONScanner) Float32ArrayText() ([]byte, int) {
	if !s.Open('[') {
		return nil, 0
	}
	// No byte of an array of numbers is a ']' but its last: the first
	// one ends it, if the array is well formed.
	start := s.i - 1
	end := bytes.IndexByte(s.b[s.i:], ']')
	if end < 0 {
		s.bad = true
		return nil, 0
	}
	b := s.b[:s.i+end] // up to the ']'
	var out []byte     // nil as long as no white space was left out
	space := func(i int) int {
		if out == nil {
			out = make([]byte, i-start, len(b)+1-start)
			copy(out, b[start:i])
		}
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		return i
	}
	i, n := s.i, 0
	if i < len(b) && isSpace(b[i]) {
		i = space(i)
	}
	for i < len(b) {
		e, slow := numberEnd(b, i)
		if e < 0 || slow && !finite32(b[i:e]) {
			s.bad = true
			return nil, 0
		}
		if out != nil {
			out = append(out, b[i:e]...)
		}
		n++
		i = e
		if i < len(b) && isSpace(b[i]) {
			i = space(i)
		}
		if i == len(b) {
			break
		}
		if b[i] != ',' {
			s.bad = true
			return nil, 0
		}
		if out != nil {
			out = append(out, ',')
		}
		i++
		if i < len(b) && isSpace(b[i]) {
			i = space(i)
		}
		if i == len(b) { // a trailing comma
			s.bad = true
			return nil, 0
		}
	}
	s.i = len(b) + 1
	if out == nil {
		return s.b[start:s.i:s.i], n
	}
	return append(out, ']'), n
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// numberEnd returns where the JSON number at b[i:] ends (-1 if there is
// none), and whether it could overflow a float32: it has an exponent, or
// more than 38 digits before the point (float32's largest is 3.4e38).
func numberEnd(b []byte, i int) (end int, slow bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		d := i
		i++
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		slow = i-d > 38
	default:
		return -1, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		n := digitRun(b[i:])
		if n == 0 {
			return -1, false
		}
		i += n
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		slow = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return -1, false
		}
	}
	return i, slow
}

// nonDigits marks with its top bit each byte of x that is not an ASCII
// digit: a byte c is one when c-'0' does not borrow and c+(0x7f-'9') does
// not carry into its top bit (the tricks of "Bit Twiddling Hacks"). A
// borrow or carry reaches the bytes above a non-digit only, so the lowest
// byte marked is exact.
func nonDigits(x uint64) uint64 {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	return (x | (x + ones*(0x7f-'9')) | (x - ones*'0')) & tops
}

// digitRun returns how many bytes at the start of b are ASCII digits,
// eight at a time.
func digitRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if m := nonDigits(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// finite32 reports whether the number text t is finite as a float32.
func finite32(t []byte) bool {
	_, err := strconv.ParseFloat(string(t), 32)
	return err == nil
}

// RawString reads a string value and returns the bytes between its
// quotes; a string holding an escape, or one that is not valid UTF-8,
// fails the scan (its text would not be its bytes).
func (s *JSONScanner) RawString() []byte {
	if s.Peek() != '"' {
		s.bad = true
		return nil
	}
	raw, esc := s.str()
	if esc {
		s.bad = true
	}
	if s.bad {
		return nil
	}
	return raw
}

// CheckBase64Vector checks t, the base64 text of a vector of float32s, and
// returns how many values it holds: it must be standard base64 (padded,
// RFC 4648's alphabet) of a whole number of float32s, each finite. It is
// decoded into scratch (grown as needed and returned) to check the
// alphabet and the values' exponents; the values are not kept.
func CheckBase64Vector(t, scratch []byte) (int, []byte, error) {
	need := base64.StdEncoding.DecodedLen(len(t))
	if cap(scratch) < need {
		scratch = make([]byte, need)
	}
	scratch = scratch[:need]
	n, err := base64.StdEncoding.Decode(scratch, t)
	if err != nil {
		return 0, scratch, fmt.Errorf("base64 embedding: %w", err)
	}
	if n%4 != 0 {
		return 0, scratch, errors.New("base64 embedding is not a whole number of float32 values")
	}
	for i := 0; i < n; i += 4 {
		// A float32's exponent is all ones for NaN and the infinities.
		if binary.LittleEndian.Uint32(scratch[i:])&0x7f800000 == 0x7f800000 {
			return 0, scratch, fmt.Errorf("base64 embedding holds %v at %d", math.Float32frombits(binary.LittleEndian.Uint32(scratch[i:])), i/4)
		}
	}
	return n / 4, scratch, nil
}
