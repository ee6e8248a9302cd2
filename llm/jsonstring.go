package llm

import "unicode/utf8"

// AppendJSONString appends s to dst as a JSON string, byte for byte as
// encoding/json writes it: with HTML escaping (<, > and & as \u003c,
// \u003e, \u0026, json.Marshal's default) when escapeHTML is set, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped. A stream encoder uses it to
// write the one field of a frame that changes (a delta's text) between a
// prefix and suffix encoded once, instead of encoding the whole frame per
// delta, and a request or reply encoder to write JSON by hand;
// FuzzAppendJSONString checks it against encoding/json.
func AppendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	safe := &safeSet
	if escapeHTML {
		safe = &htmlSafeSet
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				// Most of a text is runs of plain ASCII: passed over
				// eight bytes at a time.
				for !escapeHTML && i+8 <= len(s) && plain8(load8(s, i)) {
					i += 8
				}
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters, and <, >, & when escaping HTML
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// safeSet and htmlSafeSet are the ASCII bytes a JSON string holds as they
// are, without and with HTML escaping.
var safeSet, htmlSafeSet = func() (safe, html [utf8.RuneSelf]bool) {
	for b := range utf8.RuneSelf {
		safe[b] = b >= 0x20 && b != '"' && b != '\\'
		html[b] = safe[b] && b != '<' && b != '>' && b != '&'
	}
	return safe, html
}()

// load8 returns the eight bytes of s at i as one little-endian word (the
// compiler makes it one load).
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// plain8 reports whether all eight bytes of x are ASCII a JSON string
// holds as they are without HTML escaping (safeSet): none a control
// character, a quote, a backslash or a byte of a multi-byte rune. (The bit
// tricks of "Bit Twiddling Hacks": a byte of x is less than n, or zero,
// where the borrow leaves its top bit set; any byte flagged falsely lies
// above one flagged rightly, so the answer for the whole word is exact.)
func plain8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(ones*'"'), x^(ones*'\\')
	return (x|(x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&tops == 0
}
