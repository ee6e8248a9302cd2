package protocol

import (
	"encoding/json"
	"testing"
)

// TestFrameDecoder checks that one decoder, fed frame after frame, agrees
// with json.Unmarshal on each, including after a frame it refuses.
func TestFrameDecoder(t *testing.T) {
	type frame struct {
		A string `json:"a"`
		N []int  `json:"n"`
	}
	var d FrameDecoder
	for _, data := range []string{
		`{"a":"x","n":[1,2]}`,
		"  \n{\"a\":\"y\"}\r\n ",
		`{"a":"z"} {"a":"w"}`, // two values: trailing data
		`{"a":"after trailing data"}`,
		`{"a":`, // cut short
		`{"a":"after a cut"}`,
		`{"a":1}`, // a type error
		`{"a":"after a type error"}`,
		`[1,2]`,
		``,
		`{"a":"\u00e9\n"}`,
	} {
		var got, want frame
		gotErr := d.Decode([]byte(data), &got)
		wantErr := json.Unmarshal([]byte(data), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decode error %v, json.Unmarshal error %v", data, gotErr, wantErr)
		}
		if wantErr == nil && (got.A != want.A || len(got.N) != len(want.N)) {
			t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", data, got, want)
		}
	}
}
