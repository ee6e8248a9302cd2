package gencontent

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/golden"
	"github.com/svcgw/svcgw/llm"
)

// The streams this surface writes, read with go-sse, the reference SSE
// parser (docs/sse.md): every golden stream, and streams made from fuzzed
// events, must read as exactly the events the surface wrote.

func TestStream_SSEReference(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	if len(files) == 0 {
		t.Fatal("no golden streams")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			golden.CheckSSE(t, golden.SplitFrames(b), true)
		})
	}
}

// fuzzEvents turns fuzz steps into a canonical event sequence an encoder
// accepts: tool calls are numbered as they start, arguments go to a started
// call, and the sequence ends at a finish or an error.
func fuzzEvents(ops []golden.FuzzOp) (events []llm.Event, fail *llm.Error) {
	calls := 0
	for _, o := range ops {
		n := len(o.Text)
		switch o.Op % 7 {
		case 0:
			events = append(events, llm.Event{Type: llm.EventTextDelta, Text: o.Text})
		case 1:
			events = append(events, llm.Event{Type: llm.EventReasoningDelta, Text: o.Text})
		case 2:
			events = append(events, llm.Event{Type: llm.EventReasoningDelta, Signature: o.Text})
		case 3:
			events = append(events, llm.Event{Type: llm.EventToolCallStart, Index: calls,
				ToolCall: &llm.ToolCall{ID: o.Text, Name: o.Text, Arguments: []byte(o.Text[:n/2])}})
			calls++
		case 4:
			if calls > 0 {
				events = append(events, llm.Event{Type: llm.EventToolCallDelta, Index: n % calls, Text: o.Text})
			}
		case 5:
			reasons := []llm.FinishReason{llm.FinishStop, llm.FinishLength, llm.FinishToolCalls, llm.FinishContentFilter, llm.FinishStopSequence}
			u := llm.Usage{InputTokens: n, OutputTokens: int(o.Op), CachedInputTokens: n / 2, ReasoningTokens: int(o.Op) / 2}
			return append(events, llm.Event{Type: llm.EventFinish, FinishReason: reasons[n%len(reasons)], StopSequence: o.Text, Usage: &u}), nil
		case 6:
			kinds := []llm.Kind{llm.KindOverloaded, llm.KindUpstream, llm.KindRateLimited, llm.KindInternal, llm.KindInvalidRequest}
			return events, &llm.Error{Kind: kinds[n%len(kinds)], Message: o.Text}
		}
	}
	return events, nil
}

// seedStreams adds fuzz inputs that step through every operation, with
// texts that look like SSE.
func seedStreams(f *testing.F) {
	f.Add([]byte("\x00Hel\xff\x00lo\xff\x05"))
	f.Add([]byte("\x01think\n\nhard\xff\x02sig\xff\x00data: x\r\n\r\n\xff\x03call_1\xff\x04{\"a\":\xff\x041}\xff\x05"))
	f.Add([]byte("\x00partial\xff\x06event: error\ndata: {}\n\n"))
	f.Add([]byte("\x03{\"x\":1}\xff\x03\xff\x04[\xff\x00\u2028\xfe\r\xff\x05stop"))
}

// sseStream is the part of a stream encoder the server drives.
type sseStream interface {
	Start(w io.Writer) error
	Event(w io.Writer, ev llm.Event) error
	Error(w io.Writer, err *llm.Error) error
}

// writeFrames drives s as the server does and returns what it wrote, one
// frame per Write.
func writeFrames(t *testing.T, s sseStream, events []llm.Event, fail *llm.Error) golden.Frames {
	t.Helper()
	var frames golden.Frames
	if err := s.Start(&frames); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := s.Event(&frames, ev); err != nil {
			t.Fatalf("event %+v: %v", ev, err)
		}
	}
	if fail != nil {
		if err := s.Error(&frames, fail); err != nil {
			t.Fatal(err)
		}
	}
	return frames
}

// fuzzRequest is the streamed request of fuzz steps: the first step's text
// is the caller's model id, echoed in every frame.
func fuzzRequest(ops []golden.FuzzOp) *llm.Request {
	req := &llm.Request{Model: "svc-fusion", Stream: true}
	if len(ops) > 0 {
		req.Model = ops[0].Text
		req.IncludeUsage = ops[0].Op&0x80 != 0
		if ops[0].Op&0x40 != 0 {
			req.Reasoning = &llm.Reasoning{Enabled: true, IncludeThoughts: true}
		}
	}
	return req
}

func FuzzStream_SSEReference(f *testing.F) {
	seedStreams(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ops := golden.FuzzOps(b)
		events, fail := fuzzEvents(ops)
		s := Codec{}.NewStream(fuzzRequest(ops), Codec{}.NewID(), time.Unix(1767225600, 0))
		golden.CheckSSE(t, writeFrames(t, s, events, fail), true)
	})
}
