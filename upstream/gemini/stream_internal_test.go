package gemini

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
	f.Add([]byte("[{\"error\":{\"code\":429}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader(data)), &geminiStream{})
		if err == nil {
			protocoltest.CheckStream(t, s)
		}
	})
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one chunk never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	is := is.New(t)
	sse := "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"a\"}]},\"index\":0}]}\n\n" +
		"data: {\"candidates\":[{\"index\":0}]}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n"
	s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader([]byte(sse))), &geminiStream{})
	is.NoErr(err)
	var text bytes.Buffer
	for s.Next() {
		if ev := s.Event(); ev.Type == llm.EventTextDelta {
			text.WriteString(ev.Text + "|")
		}
	}
	is.NoErr(s.Err())
	is.Equal(text.String(), "a|b|")
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &geminiStream{}, "",
		`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Checking the "}]},"index":0}],"usageMetadata":{"promptTokenCount":120,"totalTokenCount":120},"modelVersion":"gemini-2.5-flash","responseId":"gw-7Hq2aXmK"}`+"\n\n")
}
