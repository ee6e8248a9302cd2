package chat

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// benchBody is a typical small chat-completions request.
var benchBody = []byte(`{"model":"svc-fusion","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about the sea, please."}],"max_tokens":256,"temperature":0.7,"stream":false}`)

func BenchmarkDecodeChat(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if _, err := decodeChat(benchBody); err != nil {
			b.Fatal(err)
		}
	}
}

func benchResponse() (*llm.Request, *llm.Response) {
	req := &llm.Request{Model: "svc-fusion"}
	resp := &llm.Response{
		ID: "chatcmpl-0123456789abcdefghijklmn", Model: "svc-fusion", Created: time.Unix(1767225600, 0),
		Content:      []llm.Part{llm.TextPart("Waves fold into foam, / the tide keeps its patient time, / salt on every breath.")},
		FinishReason: llm.FinishStop,
		Usage:        llm.Usage{InputTokens: 31, OutputTokens: 22},
	}
	return req, resp
}

func BenchmarkWriteResponse(b *testing.B) {
	req, resp := benchResponse()
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		if err := (Codec{}).WriteResponse(w, req, resp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamFrame(b *testing.B) {
	req, _ := benchResponse()
	s := Codec{}.NewStream(req, "chatcmpl-0123456789abcdefghijklmn", time.Unix(1767225600, 0))
	ev := llm.Event{Type: llm.EventTextDelta, Text: " patient"}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Event(io.Discard, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamOpen is what a stream's encoder costs besides its text
// deltas: the encoder, the role chunk, a first content delta (whose frame
// template it builds), the finish chunk and the usage chunk.
func BenchmarkStreamOpen(b *testing.B) {
	req, _ := benchResponse()
	req.IncludeUsage = true
	text := llm.Event{Type: llm.EventTextDelta, Text: " patient"}
	finish := llm.Event{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &llm.Usage{InputTokens: 12, OutputTokens: 34}}
	b.ReportAllocs()
	for b.Loop() {
		s := Codec{}.NewStream(req, "chatcmpl-0123456789abcdefghijklmn", time.Unix(1767225600, 0))
		if err := s.Start(io.Discard); err != nil {
			b.Fatal(err)
		}
		for _, ev := range []llm.Event{text, finish} {
			if err := s.Event(io.Discard, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkResponsesStream is a whole streamed Response of n text deltas
// (and, for the tool case, as many argument deltas of one function call):
// its cost per delta must not grow with the reply's length.
func BenchmarkResponsesStream(b *testing.B) {
	req, _ := benchResponse()
	text := llm.Event{Type: llm.EventTextDelta, Text: " patient"}
	start := llm.Event{Type: llm.EventToolCallStart, ToolCall: &llm.ToolCall{ID: "call_1", Name: "write_file"}}
	args := llm.Event{Type: llm.EventToolCallDelta, Text: `"line\n`}
	finish := llm.Event{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &llm.Usage{InputTokens: 12, OutputTokens: 34}}
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := ResponsesCodec{}.NewStream(req, "resp_0123456789abcdefghijklmn", time.Unix(1767225600, 0))
				if err := s.Start(io.Discard); err != nil {
					b.Fatal(err)
				}
				for range n {
					if err := s.Event(io.Discard, text); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Event(io.Discard, start); err != nil {
					b.Fatal(err)
				}
				for range n {
					if err := s.Event(io.Discard, args); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Event(io.Discard, finish); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/delta")
		})
	}
}
