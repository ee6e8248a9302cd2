package server

import (
	"strings"
	"unicode"
)

// maxLabelRunes bounds an application label.
const maxLabelRunes = 128

// label normalises a caller-supplied application label before it is
// stored and reported: invalid UTF-8 becomes U+FFFD, control characters
// count as spaces, bidirectional overrides and isolates are dropped (they
// would reorder the text around them in a report), runs of white space
// become one space, the ends are trimmed, and what is left is cut to
// maxLabelRunes characters. A label with nothing left is "" (the next
// source applies). Ordinary labels pass without allocating.
func label(s string) string {
	if plainLabel(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), 4*maxLabelRunes))
	n, space := 0, false
	for _, c := range strings.ToValidUTF8(s, "\uFFFD") {
		if n == maxLabelRunes {
			break
		}
		switch {
		case unicode.IsSpace(c) || unicode.IsControl(c):
			space = true
			continue
		case c >= '\u202A' && c <= '\u202E', c >= '\u2066' && c <= '\u2069':
			continue
		}
		if space && n > 0 {
			if n+2 > maxLabelRunes { // the space and c must both fit
				break
			}
			b.WriteByte(' ')
			n++
		}
		space = false
		b.WriteRune(c)
		n++
	}
	return b.String()
}

// plainLabel reports whether s is already normal: printable ASCII, single
// spaces inside, no more than maxLabelRunes.
func plainLabel(s string) bool {
	if len(s) > maxLabelRunes || s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return len(s) == 0
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == ' ' && s[i+1] == ' ' {
			return false
		}
	}
	return true
}
