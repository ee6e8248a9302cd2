package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// TestFrameDecoder checks that one decoder, fed frame after frame, agrees
// with json.Unmarshal on each, including after a frame it refuses.
func TestFrameDecoder(t *testing.T) {
	type frame struct {
		A string `json:"a"`
		N []int  `json:"n"`
	}
	var d frameDecoder
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
		gotErr := d.decode([]byte(data), &got)
		wantErr := json.Unmarshal([]byte(data), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decode error %v, json.Unmarshal error %v", data, gotErr, wantErr)
		}
		if wantErr == nil && (got.A != want.A || len(got.N) != len(want.N)) {
			t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", data, got, want)
		}
	}
}

// TestStreamFramesDoNotLeak checks that the decoders' reused frames start
// empty: a field of one chunk never shows up again in the next.
func TestStreamFramesDoNotLeak(t *testing.T) {
	is := is.New(t)
	for _, tc := range []struct {
		name string
		dec  streamDecoder
		sse  string
	}{
		{"openai", &openAIStream{},
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\",\"refusal\":\"no\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"},
		{"anthropic", &anthropicStream{blocks: map[int]*anBlockState{}},
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"gemini", &geminiStream{},
			"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"a\"}]},\"index\":0}]}\n\n" +
				"data: {\"candidates\":[{\"index\":0}]}\n\n" +
				"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := startStream(testCall(), io.NopCloser(bytes.NewReader([]byte(tc.sse))), tc.dec)
			is.NoErr(err)
			var text bytes.Buffer
			for s.Next() {
				if ev := s.Event(); ev.Type == llm.EventTextDelta {
					text.WriteString(ev.Text + "|")
				}
			}
			is.NoErr(s.Err())
			want := map[string]string{"openai": "a|no|b|", "anthropic": "a|", "gemini": "a|b|"}[tc.name]
			is.Equal(text.String(), want)
		})
	}
}
