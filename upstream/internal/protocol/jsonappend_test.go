package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

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
