package anthropic

import (
	"bytes"
	"io"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocol"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// FuzzStream feeds arbitrary bytes to the stream reader through this
// protocol's decoder. It must never panic, and a stream that succeeds has
// the shape every stream has (protocoltest.CheckStream).
func FuzzStream(f *testing.F) {
	protocoltest.SeedStreams(f)
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader(data)), &anthropicStream{blocks: map[int]*anBlockState{}})
		if err == nil {
			protocoltest.CheckStream(t, s)
		}
	})
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one event never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	is := is.New(t)
	sse := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader([]byte(sse))), &anthropicStream{blocks: map[int]*anBlockState{}})
	is.NoErr(err)
	var text bytes.Buffer
	for s.Next() {
		if ev := s.Event(); ev.Type == llm.EventTextDelta {
			text.WriteString(ev.Text + "|")
		}
	}
	is.NoErr(s.Err())
	is.Equal(text.String(), "a|")
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &anthropicStream{blocks: map[int]*anBlockState{}},
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking the \"}}\n\n")
}
