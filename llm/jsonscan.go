package llm

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONScanner reads the few fields a JSON text carries straight from it,
// without reflection and without building a generic value: a vendor's
// decoder uses it for the stream frames and replies it knows the shape of,
// and a surface for the usual request, each falling back to its full
// decoder for anything else.
//
// It is exact where it answers at all. It validates every byte it passes
// over (strings, numbers, literals, nesting) as a JSON parser must, and
// it reports failure (Bad) not only for malformed input but for any input
// whose meaning it does not decide the way encoding/json would: keys
// written with escapes or matching a wanted key only case-insensitively
// (encoding/json folds case), strings it would have to repair (invalid
// UTF-8 or a lone surrogate, which encoding/json replaces with U+FFFD),
// numbers that are not plain integers, nesting deeper than maxScanDepth.
// The caller then decodes the frame with encoding/json, whose answer,
// error included, is the one that counts. The vendors' fuzz tests check
// that the two agree on every frame the scanner accepts.
type JSONScanner struct {
	b   []byte
	i   int
	bad bool
}

// maxScanDepth bounds the nesting Skip walks; deeper input is left to
// encoding/json.
const maxScanDepth = 64

// Reset starts scanning b.
func (s *JSONScanner) Reset(b []byte) { s.b, s.i, s.bad = b, 0, false }

// Bad reports whether the scanner gave up: the input is malformed or not
// one it decides (see JSONScanner).
func (s *JSONScanner) Bad() bool { return s.bad }

// Fail marks the scan failed; a caller gives up this way on a value it
// does not handle, and Done and Bad then report it.
func (s *JSONScanner) Fail() { s.bad = true }

// Done reports whether the whole input was one value with nothing after it
// but white space, and nothing failed.
func (s *JSONScanner) Done() bool {
	s.ws()
	return !s.bad && s.i == len(s.b)
}

func (s *JSONScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Pos returns how many bytes of the input have been read.
func (s *JSONScanner) Pos() int { return s.i }

// Peek returns the next byte after white space, or 0 at the end.
func (s *JSONScanner) Peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// Open consumes c ('{' or '[') after white space.
func (s *JSONScanner) Open(c byte) bool {
	if s.Peek() != c || s.bad {
		s.bad = true
		return false
	}
	s.i++
	return true
}

// More reports whether the object or array being read (closed by close)
// has another member, consuming the comma before it; at the end it
// consumes close and returns false. first is whether no member has been
// read yet. After a false, check Bad.
func (s *JSONScanner) More(close byte, first bool) bool {
	if s.bad {
		return false
	}
	c := s.Peek()
	if c == close {
		s.i++
		return false
	}
	if !first {
		if c != ',' {
			s.bad = true
			return false
		}
		s.i++
		c = s.Peek()
	}
	if c == close || c == 0 { // a trailing comma, or the end
		s.bad = true
		return false
	}
	return true
}

// Key reads an object member's key and its colon. A key written with
// escapes fails the scan: encoding/json would match it unescaped.
func (s *JSONScanner) Key() []byte {
	raw, esc := s.str()
	if esc {
		s.bad = true
	}
	if s.Peek() != ':' {
		s.bad = true
		return nil
	}
	s.i++
	return raw
}

// Unknown checks a key the caller does not want against the ones it does:
// encoding/json would match a key equal to one of them but for case, so
// such a key fails the scan.
func (s *JSONScanner) Unknown(key []byte, known ...string) {
	ascii := true
	for _, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for _, k := range known {
		// An ASCII key can only fold to a key of its own length; one
		// with other letters may fold to a shorter or longer one (the
		// Kelvin sign folds to k).
		if (!ascii || len(key) == len(k)) && bytes.EqualFold(key, []byte(k)) {
			s.bad = true
			return
		}
	}
	s.Skip()
}

// Once marks bit in *seen, failing the scan if it was marked: a caller
// calls it for each key it reads, since encoding/json decodes a repeated
// key again over the first, which the scanner does not imitate.
func (s *JSONScanner) Once(seen *uint32, bit uint32) {
	if *seen&bit != 0 {
		s.bad = true
	}
	*seen |= bit
}

// OptString reads a string or null into what a *string field gets.
func (s *JSONScanner) OptString() *string {
	if s.Null() {
		return nil
	}
	t := s.String()
	return &t
}

// Null consumes a null literal if one comes next.
func (s *JSONScanner) Null() bool {
	if s.Peek() == 'n' && bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// String reads a string value and returns its text. A string encoding/json
// would repair (invalid UTF-8, a lone surrogate escape) fails the scan, as
// does a value that is not a string.
func (s *JSONScanner) String() string {
	if s.Peek() != '"' {
		s.bad = true
		return ""
	}
	raw, esc := s.str()
	if s.bad {
		return ""
	}
	if !esc {
		if !utf8.Valid(raw) {
			s.bad = true
			return ""
		}
		return string(raw)
	}
	t, ok := unescape(raw)
	if !ok {
		s.bad = true
	}
	return t
}

// Word reads a string value as String does, returning the one of words
// it equals without allocating: for the type names and reasons a frame
// repeats.
func (s *JSONScanner) Word(words []string) string {
	if s.Peek() == '"' {
		save := s.i
		raw, esc := s.str()
		if !s.bad && !esc {
			for _, w := range words {
				if string(raw) == w {
					return w
				}
			}
		}
		s.i, s.bad = save, false
	}
	return s.String()
}

// Bool reads true or false; anything else fails the scan.
func (s *JSONScanner) Bool() bool {
	switch s.Peek() {
	case 't':
		s.literal("true")
		return !s.bad
	case 'f':
		s.literal("false")
	default:
		s.bad = true
	}
	return false
}

// Int reads an integer value: a number without fraction or exponent that
// fits an int. Anything else fails the scan (encoding/json refuses it for
// an int field, with an error the caller's fallback reports).
func (s *JSONScanner) Int() int {
	s.ws()
	start := s.i
	if ok, integer := s.number(); !ok || !integer {
		s.bad = true
		return 0
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil {
		s.bad = true
	}
	return n
}

// Float reads a number as a float64 field gets it (strconv.ParseFloat of
// its text); a number out of float64's range, or a value that is not a
// number, fails the scan.
func (s *JSONScanner) Float() float64 { return s.float(64) }

// Float32 reads a number as a float32 field gets it (strconv.ParseFloat of
// its text, to 32 bits: rounded once, not through a float64); a number
// out of float32's range, or a value that is not a number, fails the scan.
func (s *JSONScanner) Float32() float32 { return float32(s.float(32)) }

func (s *JSONScanner) float(bitSize int) float64 {
	s.ws()
	start := s.i
	if ok, _ := s.number(); !ok {
		s.bad = true
		return 0
	}
	f, err := strconv.ParseFloat(string(s.b[start:s.i]), bitSize)
	if err != nil {
		s.bad = true
	}
	return f
}

// Skip reads any one value, checking its syntax.
func (s *JSONScanner) Skip() { s.skip(0) }

func (s *JSONScanner) skip(depth int) {
	if depth > maxScanDepth {
		s.bad = true
		return
	}
	switch c := s.Peek(); {
	case c == '"':
		s.str()
	case c == '{':
		s.i++
		for first := true; s.More('}', first); first = false {
			s.str()
			if s.Peek() != ':' {
				s.bad = true
				return
			}
			s.i++
			s.skip(depth + 1)
		}
	case c == '[':
		s.i++
		for first := true; s.More(']', first); first = false {
			s.skip(depth + 1)
		}
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		if ok, _ := s.number(); !ok {
			s.bad = true
		}
	default:
		s.bad = true
	}
}

func (s *JSONScanner) literal(lit string) {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		s.bad = true
		return
	}
	s.i += len(lit)
}

// number consumes a JSON number (RFC 8259 section 6) and reports whether it
// was one and whether it was an integer (no fraction, no exponent).
func (s *JSONScanner) number() (ok, integer bool) {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true, integer
}

// str reads a string, validating it, and returns the bytes between its
// quotes and whether they hold an escape.
func (s *JSONScanner) str() (raw []byte, escaped bool) {
	if s.Peek() != '"' {
		s.bad = true
		return nil, false
	}
	b := s.b
	start := s.i + 1
	i := start
	for {
		i += plainRun(b[i:])
		if i >= len(b) {
			s.bad = true
			return nil, false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return b[start:i], escaped
		case '\\':
			escaped = true
			i++
			if i >= len(b) {
				s.bad = true
				return nil, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					s.bad = true
					return nil, false
				}
				i += 5
			default:
				s.bad = true
				return nil, false
			}
		default: // a control character, which a string may hold only escaped
			s.bad = true
			return nil, false
		}
	}
}

// plainRun returns how many bytes at the start of b are neither a quote,
// a backslash nor a control character. It looks at eight bytes at a time
// (the bit tricks of "Bit Twiddling Hacks": a byte of x is zero, or less
// than n, where the borrow leaves its top bit set; the lowest such byte
// is exact).
func plainRun(b []byte) int {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^(ones*'"'), x^(ones*'\\')
		if m := ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x) & tops; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unescape decodes the text of a string str has validated. It reports
// false for what encoding/json would repair: invalid UTF-8 and escapes of
// lone surrogates.
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			if !utf8.Valid(raw[i:j]) {
				return "", false
			}
			out = append(out, raw[i:j]...)
			i = j
			continue
		}
		switch e := raw[i+1]; e {
		case 'u':
			r := hex4(raw[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return "", false
				}
				r = utf16.DecodeRune(r, hex4(raw[i+2:i+6]))
				if r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			out = append(out, unescapeByte[e])
			i += 2
		}
	}
	return string(out), true
}

var unescapeByte = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
