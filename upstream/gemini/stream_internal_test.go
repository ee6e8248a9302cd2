package gemini

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svcgw/svcgw/upstream/internal/protocol"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// FuzzStream fuzzes the stream decoder (see protocoltest.FuzzDecoder).
func FuzzStream(f *testing.F) {
	protocoltest.FuzzDecoder(f, func() protocol.Decoder { return &geminiStream{} },
		"[{\"error\":{\"code\":429}}]\n")
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one chunk never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	sse := "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"a\"}]},\"index\":0}]}\n\n" +
		"data: {\"candidates\":[{\"index\":0}]}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n"
	if got := protocoltest.StreamText(t, &geminiStream{}, sse); got != "a|b|" {
		t.Errorf("text deltas %q, want %q", got, "a|b|")
	}
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &geminiStream{}, "",
		`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Checking the "}]},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-2.5-flash","responseId":"gw-7Hq2aXmK"}`+"\n\n")
}

// FuzzScanChunk checks the chunk scanner against encoding/json: whatever
// chunk it accepts, json.Unmarshal accepts too and decodes to the same
// value (an empty slice and a nil one are the same to Decode). Seeded with
// every frame of the recorded streams and with chunks on the edges of what
// the scanner decides. One scanBufs serves all of a run's inputs, as one
// stream's do, so its reuse is checked too.
func FuzzScanChunk(f *testing.F) {
	for _, s := range protocoltest.RecordedFrames(f, "testdata") {
		f.Add(s)
	}
	for _, s := range gmScanSeeds {
		f.Add([]byte(s))
	}
	var b scanBufs
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanChunk(t, &b, data)
	})
}

var gmScanSeeds = []string{
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"Checking the "}]},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-2.5-flash","responseId":"gw-7Hq2aXmK"}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"done \u00e9\ud83d\ude00\n"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":16,"totalTokenCount":28,"thoughtsTokenCount":3,"promptTokensDetails":[{"modality":"TEXT","tokenCount":12}]}}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"a","thoughtSignature":"c2ln"}]},"index":0}]}`,
	`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}}}]},"index":0}]}`,
	`{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}]}`,
	`{"candidates":[{"content":{"parts":[]},"finishReason":"MAX_TOKENS"},{"index":1}]}`,
	`{"candidates":[],"promptFeedback":{"blockReason":"SAFETY"}}`,
	`{"candidates":null,"usageMetadata":null,"promptFeedback":null,"error":null}`,
	`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`,
	`[{"candidates":[{"content":{"parts":[{"text":"array"}]}}]}]`,
	`{"candidates":[null,{"content":null,"finishReason":null,"index":null}]}`,
	`{"candidates":[{"content":{"parts":[null,{"text":null,"thought":null}]}}]}`,
	`{"Candidates":[{"content":{"parts":[{"text":"case"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"TEXT":"case"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a","text":"b"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a","thought":"yes"}]}}]}`,
	`{"candidates":[{"index":1.5}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"caf` + "\xe9" + `"}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"safetyRatings":[{"category":"HARM","probability":"NEGLIGIBLE"}],"citationMetadata":{}}]} `,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]} x`,
	`{"usageMetadata":{"promptTokenCount":1e3}}`,
}

func checkScanChunk(t *testing.T, b *scanBufs, data []byte) {
	var got gmResponse
	if !b.chunk(data, &got) {
		return
	}
	var want gmResponse
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: scanned, but json.Unmarshal fails: %v", data, err)
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("%q: scanned chunk differs from json.Unmarshal's (-want +got):\n%s", data, d)
	}
}

// TestScanChunk runs the seeds, and checks that the scanner takes the
// chunks a text stream is made of.
func TestScanChunk(t *testing.T) {
	var b scanBufs
	for _, s := range gmScanSeeds {
		checkScanChunk(t, &b, []byte(s))
	}
	for _, s := range gmScanSeeds[:3] {
		if !b.chunk([]byte(s), &gmResponse{}) {
			t.Errorf("%s: not scanned", s)
		}
	}
}
