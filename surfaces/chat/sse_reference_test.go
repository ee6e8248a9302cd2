package chat

import (
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/golden"
)

// The streams this surface writes, read with go-sse, the reference SSE
// parser (docs/sse.md): every golden stream, and streams made from fuzzed
// events, must read as exactly the events the surface wrote.

func TestStream_SSEReference(t *testing.T) {
	golden.CheckSSEFiles(t, "testdata/*.sse", false)
}

// FuzzStream_SSEReference drives the stream encoder with fuzzed events
// (golden.FuzzStream): go-sse must read what it writes as exactly the
// events of its frames.
func FuzzStream_SSEReference(f *testing.F) {
	golden.SeedStreams(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		req, events, fail := golden.FuzzStream(b)
		created := time.Unix(1767225600, 0)
		golden.CheckSSE(t, golden.WriteFrames(t, Codec{}.NewStream(req, Codec{}.NewID(), created), events, fail), false)
		golden.CheckSSE(t, golden.WriteFrames(t, ResponsesCodec{}.NewStream(req, ResponsesCodec{}.NewID(), created), events, fail), false)
	})
}
