package gemini

import (
	"testing"

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
