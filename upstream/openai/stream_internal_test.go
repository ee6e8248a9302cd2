package openai

import (
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
