package gencontent

import (
	"io"
	"testing"

	"github.com/svcgw/svcgw/llm"
)

// BenchmarkStreamFrame is one text delta: the part held before it goes out
// as a data chunk.
func BenchmarkStreamFrame(b *testing.B) {
	s := newStream(&llm.Request{Model: "gemini-2.5-flash"}, "gw-0123456789abcdefghijklmn")
	ev := llm.Event{Type: llm.EventTextDelta, Text: " patient"}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Event(io.Discard, ev); err != nil {
			b.Fatal(err)
		}
	}
}
