package anthropic

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/svcgw/svcgw/upstream/internal/protocol"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// FuzzStream fuzzes the stream decoder (see protocoltest.FuzzDecoder).
func FuzzStream(f *testing.F) {
	protocoltest.FuzzDecoder(f, func() protocol.Decoder { return &anthropicStream{blocks: map[int]*anBlockState{}} },
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n")
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one event never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	sse := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	if got := protocoltest.StreamText(t, &anthropicStream{blocks: map[int]*anBlockState{}}, sse); got != "a|" {
		t.Errorf("text deltas %q, want %q", got, "a|")
	}
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &anthropicStream{blocks: map[int]*anBlockState{}},
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking the \"}}\n\n")
}

// FuzzScanEvent checks the event scanner against encoding/json: whatever
// frame it accepts, json.Unmarshal accepts too and decodes to the same
// event. Seeded with every frame of the recorded streams and with frames
// on the edges of what the scanner decides.
func FuzzScanEvent(f *testing.F) {
	for _, s := range protocoltest.RecordedFrames(f, "testdata") {
		f.Add(s)
	}
	for _, s := range anScanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanEvent(t, data)
	})
}

var anScanSeeds = []string{
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello \"world\" \u00e9\ud83d\ude00\n"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQB"}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"message_stop"}`,
	`{"type":"ping"}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`,
	`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":null}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`{"type":"content_block_delta","index":0,"delta":null}`,
	`{"type":null,"index":null,"delta":{"text":null}}`,
	`{"Type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"case"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"TEXT":"case"}}`,
	`{"type":"content_block_delta","type":"message_stop"}`,
	`{"type":"content_block_delta","index":0,"delta":{"text":"a","text":"b"}}`,
	`{"type":"content_block_delta","index":1.0,"delta":{"text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"text":"caf` + "\xe9" + `"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"text":"\ud83d"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"text":["not a string"]}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","extra":{"n":[1,2.5,true]}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"text":"a"}} trailing`,
	`{"t\u0079pe":"message_stop"}`,
	`[]`,
	`null`,
}

func checkScanEvent(t *testing.T, data []byte) {
	var sc protocol.Scanner
	var got anEvent
	var d anDelta
	if !scanEvent(&sc, data, &got, &d) {
		return
	}
	var want anEvent
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: scanned, but json.Unmarshal fails: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%q:\nscanned   %s\nunmarshal %s", data, gb, wb)
	}
}

// TestScanEvent runs the seeds, and checks that the scanner takes the
// frames a text stream is mostly made of.
func TestScanEvent(t *testing.T) {
	for _, s := range anScanSeeds {
		checkScanEvent(t, []byte(s))
	}
	for _, s := range anScanSeeds[:7] {
		var sc protocol.Scanner
		if !scanEvent(&sc, []byte(s), &anEvent{}, &anDelta{}) {
			t.Errorf("%s: not scanned", s)
		}
	}
}
