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
