package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// jsonStringSeeds are strings on the edges of encoding/json's escaping.
var jsonStringSeeds = []string{
	"", "plain", `quote " and backslash \`, "<b>&amp;</b>", "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"caf\xe9", "\xff\xfe", "\xe2\x80", "é ü 中文 😀", "\u2028\u2029", "a\u2028b\u2029c", "\ufffd",
	"\xed\xa0\x80", "zero\u200bwidth", "tab\there", "/slash/",
}

func checkJSONString(t *testing.T, s string) {
	want, err := EncodeJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendJSONString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("%q: appended %s, EncodeJSON %s", s, got[1:], want)
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range jsonStringSeeds {
		checkJSONString(t, s)
	}
	for b := range 256 {
		checkJSONString(t, string([]byte{'a', byte(b), 'z'}))
	}
}

// FuzzAppendJSONString checks AppendJSONString against EncodeJSON.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStringSeeds {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}

func checkJSONFloat(t *testing.T, v float64) {
	want, err := json.Marshal(v)
	got, ok := AppendJSONFloat(nil, v)
	if ok != (err == nil) {
		t.Fatalf("%v: appended %v, json.Marshal error %v", v, ok, err)
	}
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("%v: appended %s, json.Marshal %s", v, got, want)
	}
}

func TestAppendJSONFloat(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 0.7, 1.0 / 3, 2, 1e-6, 9.99999e-7, 1e-7, 1e20, 1e21, 1.5e300,
		-1e-320, math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.125, math.NaN(), math.Inf(1), math.Inf(-1)} {
		checkJSONFloat(t, v)
	}
}

// FuzzAppendJSONFloat checks AppendJSONFloat against json.Marshal.
func FuzzAppendJSONFloat(f *testing.F) {
	for _, v := range []float64{0, 0.7, 1e-7, 1e21, math.Inf(1)} {
		f.Add(v)
	}
	f.Fuzz(checkJSONFloat)
}
