package openai

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
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1000000000,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader(data)), &openAIStream{})
		if err == nil {
			protocoltest.CheckStream(t, s)
		}
	})
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one chunk never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	is := is.New(t)
	sse := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\",\"refusal\":\"no\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader([]byte(sse))), &openAIStream{})
	is.NoErr(err)
	var text bytes.Buffer
	for s.Next() {
		if ev := s.Event(); ev.Type == llm.EventTextDelta {
			text.WriteString(ev.Text + "|")
		}
	}
	is.NoErr(s.Err())
	is.Equal(text.String(), "a|no|b|")
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &openAIStream{}, "",
		`data: {"id":"chatcmpl-gw1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-mini","system_fingerprint":"fp_gw01","choices":[{"index":0,"delta":{"content":"Checking the "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n")
}
