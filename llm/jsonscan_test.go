package llm

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzScannerSkip checks the scanner's syntax against encoding/json's:
// Skip accepts exactly the valid JSON texts (nested no deeper than it
// walks), and String, Int and Float32, where they answer, answer what
// json.Unmarshal does.
func FuzzScannerSkip(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-2.5e3,true,false,null,"x\n\u00e9\ud83d\ude00"],"b":{}}`,
		`"plain"`, `"esc\"aped\\"`, `"\ud800"`, `"\u12"`, `"` + "\x01" + `"`, `"caf` + "\xe9" + `"`,
		`0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+5`, `-`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`,
		`[` + strings.Repeat("[", 70) + strings.Repeat("]", 71), `nul`, `truex`, ` [ ] `, ``,
		`"abcdefgh\"ijklmnop"`, `true`, `false`, ` true `, `tru`, `"abcdefghijklmnopqrstu` + "\t" + `vw"`,
		`1.0000001192092896`, `3.4028235e38`, `3.5e38`, `1e-46`, `-0.0071952683`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var s JSONScanner
		s.Reset([]byte(in))
		s.Skip()
		got := s.Done()
		want := json.Valid([]byte(in))
		if got && !want {
			t.Fatalf("%q: scanner accepts invalid JSON", in)
		}
		if want && !got && depth(in) <= maxScanDepth {
			t.Fatalf("%q: scanner refuses valid JSON", in)
		}
		s.Reset([]byte(in))
		if str := s.String(); s.Done() {
			var w string
			if err := json.Unmarshal([]byte(in), &w); err != nil || w != str {
				t.Fatalf("%q: String %q, json.Unmarshal %q (%v)", in, str, w, err)
			}
		}
		s.Reset([]byte(in))
		str, ok := s.String(), s.Done()
		s.Reset([]byte(in))
		if w := s.Word([]string{"plain", "esc\"aped\\", ""}); s.Done() != ok || w != str {
			t.Fatalf("%q: Word %q (%v), String %q (%v)", in, w, !ok, str, ok)
		}
		s.Reset([]byte(in))
		if v := s.Bool(); s.Done() {
			var w bool
			if err := json.Unmarshal([]byte(in), &w); err != nil || w != v {
				t.Fatalf("%q: Bool %v, json.Unmarshal %v (%v)", in, v, w, err)
			}
		}
		s.Reset([]byte(in))
		if n := s.Int(); s.Done() {
			var w int
			if err := json.Unmarshal([]byte(in), &w); err != nil || w != n {
				t.Fatalf("%q: Int %d, json.Unmarshal %d (%v)", in, n, w, err)
			}
		}
		s.Reset([]byte(in))
		if f := s.Float32(); s.Done() {
			var w float32
			if err := json.Unmarshal([]byte(in), &w); err != nil || w != f {
				t.Fatalf("%q: Float32 %v, json.Unmarshal %v (%v)", in, f, w, err)
			}
		}
	})
}

// depth is the deepest nesting of brackets in in, ignoring strings
// roughly (enough for the fuzz target's purpose).
func depth(in string) int {
	d, m := 0, 0
	for _, c := range in {
		switch c {
		case '[', '{':
			d++
			m = max(m, d)
		case ']', '}':
			d--
		}
	}
	return m
}

func TestPlainRun(t *testing.T) {
	for _, in := range []string{"", "abc", "abcdefgh", "abcdefghi\"", "ab\\", "\x1f", "héllo wörld, a long plain run\"", "12345678\n", "1234567\x00"} {
		want := len(in)
		for i := range len(in) {
			if c := in[i]; c == '"' || c == '\\' || c < 0x20 {
				want = i
				break
			}
		}
		if got := plainRun([]byte(in)); got != want {
			t.Errorf("plainRun(%q) = %d, want %d", in, got, want)
		}
	}
}
