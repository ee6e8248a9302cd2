package llm

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

func TestFloat32ArrayText(t *testing.T) {
	big38 := "1" + strings.Repeat("0", 38) // 1e38: finite
	big39 := "1" + strings.Repeat("0", 39) // 1e39: beyond float32
	for _, tc := range []struct {
		in, text string // text "" when the scan must fail
		n        int
	}{
		{`[0.1,-0.25,3]`, `[0.1,-0.25,3]`, 3},
		{`[ 0.1 ,
	-0.25,3 ]`, `[0.1,-0.25,3]`, 3},
		{`[-0.012345678,0.000000001]`, `[-0.012345678,0.000000001]`, 2},
		{`[1e-3,2E+2,-3e0]`, `[1e-3,2E+2,-3e0]`, 3},
		{`[1e-999]`, `[1e-999]`, 1}, // underflows to 0: finite
		{`[` + big38 + `]`, `[` + big38 + `]`, 1},
		{`[0]`, `[0]`, 1},
		{`[]`, `[]`, 0},
		{`[ ]`, `[]`, 0},
		{`[1e39]`, "", 0},
		{`[3.5e38]`, "", 0},
		{`[-1E999]`, "", 0},
		{`[` + big39 + `]`, "", 0},
		{`[` + big39 + `.5]`, "", 0},
		{`[01]`, "", 0},
		{`[1.]`, "", 0},
		{`[.5]`, "", 0},
		{`[-]`, "", 0},
		{`[+1]`, "", 0},
		{`[1e]`, "", 0},
		{`[1e+]`, "", 0},
		{`[1,,2]`, "", 0},
		{`[1,]`, "", 0},
		{`[,1]`, "", 0},
		{`[1 2]`, "", 0},
		{`[NaN]`, "", 0},
		{`[Infinity]`, "", 0},
		{`[-Infinity]`, "", 0},
		{`[0x10]`, "", 0},
		{`[1,null]`, "", 0},
		{`[1,"2"]`, "", 0},
		{`[1,[2]]`, "", 0},
		{`[1.5`, "", 0},
		{`[1.2345678901234567890]`, `[1.2345678901234567890]`, 1},
		{`[1.23456789a]`, "", 0},
	} {
		var s JSONScanner
		s.Reset([]byte(tc.in + ` x`))
		text, n := s.Float32ArrayText()
		if tc.text == "" {
			if !s.Bad() {
				t.Errorf("%q: scanned as %q (%d), want a failure", tc.in, text, n)
			}
			continue
		}
		if s.Bad() || string(text) != tc.text || n != tc.n || s.Peek() != 'x' {
			t.Errorf("%q: %q, %d, bad %v, next %q; want %q, %d", tc.in, text, n, s.Bad(), s.Peek(), tc.text, tc.n)
		}
		if n > 0 {
			v, err := DecodeEmbedText(WireOpenAIFloats, text)
			if err != nil || len(v) != n {
				t.Errorf("%q: decoded %v, %v", text, v, err)
			}
		}
	}
}

// TestFloat32ArrayText_NoCopy checks that text without white space is
// returned as a slice of the input, not copied.
func TestFloat32ArrayText_NoCopy(t *testing.T) {
	in := []byte(`[0.5,-0.5]`)
	var s JSONScanner
	s.Reset(in)
	text, _ := s.Float32ArrayText()
	if &text[0] != &in[0] || cap(text) != len(in) {
		t.Fatal("copied")
	}
}

func TestDigitRun(t *testing.T) {
	for c := range 256 {
		for pos := range 12 {
			b := []byte("012345678901")
			b[pos] = byte(c)
			want := len(b)
			if c < '0' || c > '9' {
				want = pos
			}
			if got := digitRun(b); got != want {
				t.Fatalf("%q: %d, want %d", b, got, want)
			}
			if got := digitRun(b[:pos+1]); got != min(want, pos+1) {
				t.Fatalf("%q: %d", b[:pos+1], got)
			}
		}
	}
}

func TestCheckBase64Vector(t *testing.T) {
	enc := func(v ...uint32) string {
		var raw []byte
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint32(raw, x)
		}
		return base64.StdEncoding.EncodeToString(raw)
	}
	one, half := math.Float32bits(1), math.Float32bits(-0.5)
	for _, tc := range []struct {
		in string
		n  int // -1: refused
	}{
		{enc(one, half, one), 3},
		{enc(one), 1},
		{enc(one, half), 2},
		{enc(one, 0x7fc00000), -1},                   // NaN
		{enc(0x7f800000), -1},                        // +Inf
		{enc(0xff800000, one), -1},                   // -Inf
		{enc(one)[:len(enc(one))-1], -1},             // cut
		{strings.TrimRight(enc(one), "="), -1},       // unpadded
		{enc(one, half)[:4], -1},                     // 3 bytes: not whole float32s
		{strings.Replace(enc(one), "A", "-", 1), -1}, // the URL alphabet
		{"AAAA AAA", -1},
	} {
		n, _, err := CheckBase64Vector([]byte(tc.in), nil)
		if tc.n < 0 && err == nil || tc.n >= 0 && (err != nil || n != tc.n) {
			t.Errorf("%q: %d, %v; want %d", tc.in, n, err, tc.n)
		}
	}
}
