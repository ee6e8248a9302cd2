package llm

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString checks AppendJSONString against encoding/json's encoder,
// with and without HTML escaping.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain words", `quote " and \ backslash`, "\b\f\n\r\t\x00\x1f\x7f",
		"<tag> & co", "caf\xe9", "\xed\xa0\x80 surrogate", "line\u2028sep\u2029para", "émoji 😀", "\xff\xfe", "a\xc3",
		"a longer text, of plain words: past eight bytes at a time", "twenty-four plain bytes<", "0123456789abcdef\"quoted\" and \\ more text"} {
		f.Add(s)
	}
	f.Fuzz(checkAppendJSONString)
}

func checkAppendJSONString(t *testing.T, s string) {
	for _, html := range []bool{false, true} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		w := bytes.TrimSuffix(want.Bytes(), []byte("\n"))
		if got := AppendJSONString([]byte("x"), s, html); !bytes.Equal(got[1:], w) || got[0] != 'x' {
			t.Fatalf("AppendJSONString(%q, html %v) = %s, encoding/json %s", s, html, got[1:], w)
		}
	}
}

// TestAppendJSONStringWords puts every byte at every place of a text long
// enough for the eight-byte runs (plain8), alone and after a multi-byte
// rune, and checks the bytes against encoding/json.
func TestAppendJSONStringWords(t *testing.T) {
	const plain = "abcdefghijklmnopqrstuvwxyz012345"
	for b := range 256 {
		for i := range len(plain) {
			s := []byte(plain)
			s[i] = byte(b)
			checkAppendJSONString(t, string(s))
			checkAppendJSONString(t, "é"+string(s))
			if i+1 < len(s) {
				s[i+1] = 0x80 | byte(b)&0x3f
				checkAppendJSONString(t, string(s))
			}
		}
	}
}
