package messages

import (
	"io"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// BenchmarkStreamFrame is one text delta of an open text block: a
// content_block_delta frame.
func BenchmarkStreamFrame(b *testing.B) {
	s := newStream(&llm.Request{Model: "svc-fusion"}, "msg_0123456789abcdefghijklmn", time.Unix(1767225600, 0))
	ev := llm.Event{Type: llm.EventTextDelta, Text: " patient"}
	if err := s.Event(io.Discard, ev); err != nil { // message_start, ping, the block's start
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Event(io.Discard, ev); err != nil {
			b.Fatal(err)
		}
	}
}
