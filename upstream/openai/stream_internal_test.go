package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/svcgw/svcgw/upstream/internal/protocol"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// FuzzStream fuzzes the stream decoder (see protocoltest.FuzzDecoder).
func FuzzStream(f *testing.F) {
	protocoltest.FuzzDecoder(f, func() protocol.Decoder { return &openAIStream{} },
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1000000000,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one chunk never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	sse := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\",\"refusal\":\"no\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	if got := protocoltest.StreamText(t, &openAIStream{}, sse); got != "a|no|b|" {
		t.Errorf("text deltas %q, want %q", got, "a|no|b|")
	}
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &openAIStream{}, "",
		`data: {"id":"chatcmpl-gw1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-mini","system_fingerprint":"fp_gw01","choices":[{"index":0,"delta":{"content":"Checking the "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n")
}

// FuzzScanChunk checks the chunk scanner against encoding/json: whatever
// frame it accepts, json.Unmarshal accepts too and decodes to the same
// chunk. Seeded with every frame of the recorded streams and with frames
// that tell the two apart if either gets a detail wrong.
func FuzzScanChunk(f *testing.F) {
	for _, s := range protocoltest.RecordedFrames(f, "testdata") {
		f.Add(s)
	}
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanChunk(t, data)
	})
}

// scanSeeds are frames on the edges of what the scanner decides.
var scanSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"content":"a\nb \"q\" \u00e9 \ud83d\ude00 \/"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\ud83d"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\ud83d\u0041"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"caf` + "\xe9" + `"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think","reasoning":"think"}}]}`,
	`{"choices":[{"index":1,"delta":{"refusal":"no"},"finish_reason":"stop"},{"index":0,"delta":{}}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":3}}}`,
	`{"Choices":[{"index":0,"delta":{"content":"case"}}]}`,
	`{"choices":[{"INDEX":1,"delta":{"content":"case"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0.0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":1e0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":-0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":01,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":99999999999999999999,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":"0","delta":{"content":"a"}}]}`,
	`{"choices":[null,{"index":0,"delta":null,"finish_reason":null}]}`,
	`{"choices":null,"usage":null,"error":null}`,
	`{"error":{"message":"boom","type":"server_error"}}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"parts"}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}]}}]}`,
	`{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"choices":[]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}]} x`,
	`{"choices":[{"index":0,"delta":{"content":"a"}},]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}],}`,
	`{"ch\u006fices":[{"index":0,"delta":{"content":"escaped key"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop","extra":[true,false,null,-1.5e+3,"s",{}]}]}`,
	`null`,
	`[]`,
	`{"choices":[{"index":0,"delta":{"content":"tab	in string"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\x"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\u12"}}]}`,
}

func checkScanChunk(t *testing.T, data []byte) {
	var sc protocol.Scanner
	var got oaChunk
	if !scanChunk(&sc, data, &got) {
		return
	}
	var want oaChunk
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: scanned, but json.Unmarshal fails: %v", data, err)
	}
	if len(got.Choices) == 0 && len(want.Choices) == 0 {
		got.Choices, want.Choices = nil, nil // reused or nil: the same to Decode
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%q:\nscanned   %s\nunmarshal %s", data, gb, wb)
	}
}

// TestScanChunk runs the seeds, and checks that the scanner takes the
// frames a text stream is made of.
func TestScanChunk(t *testing.T) {
	for _, s := range scanSeeds {
		checkScanChunk(t, []byte(s))
	}
	for _, s := range scanSeeds[:2] {
		var sc protocol.Scanner
		if !scanChunk(&sc, []byte(s), &oaChunk{}) {
			t.Errorf("%s: not scanned", s)
		}
	}
}
