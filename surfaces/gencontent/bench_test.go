package gencontent

import (
	"fmt"
	"io"
	"strings"
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

// BenchmarkDecodeRequest_ThoughtChunks is a history whose model turn holds
// a reasoning block as the chat helpers replay it, one content a streamed
// chunk (go-genai, python-genai): its cost must grow with the chunks, not
// with their square.
func BenchmarkDecodeRequest_ThoughtChunks(b *testing.B) {
	for _, n := range []int{100, 3000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			var body strings.Builder
			body.WriteString(`{"contents":[{"role":"user","parts":[{"text":"Think."}]}`)
			for range n {
				body.WriteString(`,{"role":"model","parts":[{"text":"a thought of about forty characters, or so. ","thought":true}]}`)
			}
			body.WriteString(`,{"role":"model","parts":[{"text":"Done."}]},{"role":"user","parts":[{"text":"Again."}]}]}`)
			raw := []byte(body.String())
			req, err := decodeRequest(raw, "")
			if err != nil {
				b.Fatal(err)
			}
			if got := len(req.Messages[1].Parts[0].Text); got != 44*n {
				b.Fatalf("the block holds %d bytes of text, want %d", got, 44*n)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeRequest(raw, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
