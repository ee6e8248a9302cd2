package anthropic

import (
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
