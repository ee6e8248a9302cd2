package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/llm"

	"github.com/svcgw/svcgw/upstream/internal/protocol"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// FuzzStream fuzzes the stream decoder (see protocoltest.FuzzDecoder).
func FuzzStream(f *testing.F) {
	protocoltest.FuzzDecoder(f, func() protocol.Decoder { return &openAIStream{} },
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1000000000,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// TestStreamFrameDoesNotLeak checks that the decoder's reused frame starts
// empty: a field of one chunk never shows up again in the next.
func TestStreamFrameDoesNotLeak(t *testing.T) {
	sse := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\",\"refusal\":\"no\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	if got := protocoltest.StreamText(t, &openAIStream{}, sse); got != "a|no|b|" {
		t.Errorf("text deltas %q, want %q", got, "a|no|b|")
	}
}

func BenchmarkStreamChunk(b *testing.B) {
	protocoltest.BenchmarkChunk(b, &openAIStream{}, "",
		`data: {"id":"chatcmpl-gw1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-mini","system_fingerprint":"fp_gw01","choices":[{"index":0,"delta":{"content":"Checking the "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n")
}

// FuzzScanChunk checks the chunk scanner against encoding/json: whatever
// frame it accepts, json.Unmarshal accepts too and decodes to the same
// chunk. Seeded with every frame of the recorded streams and with frames
// that tell the two apart if either gets a detail wrong.
func FuzzScanChunk(f *testing.F) {
	for _, s := range protocoltest.RecordedFrames(f, "testdata") {
		f.Add(s)
	}
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanChunk(t, data)
	})
}

// scanSeeds are frames on the edges of what the scanner decides.
var scanSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"content":"a\nb \"q\" \u00e9 \ud83d\ude00 \/"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\ud83d"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\ud83d\u0041"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"caf` + "\xe9" + `"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think","reasoning":"think"}}]}`,
	`{"choices":[{"index":1,"delta":{"refusal":"no"},"finish_reason":"stop"},{"index":0,"delta":{}}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":3}}}`,
	`{"Choices":[{"index":0,"delta":{"content":"case"}}]}`,
	`{"choices":[{"INDEX":1,"delta":{"content":"case"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0.0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":1e0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":-0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":01,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":99999999999999999999,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":"0","delta":{"content":"a"}}]}`,
	`{"choices":[null,{"index":0,"delta":null,"finish_reason":null}]}`,
	`{"choices":null,"usage":null,"error":null}`,
	`{"error":{"message":"boom","type":"server_error"}}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"parts"}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1,"bytes":[97],"top_logprobs":[]}]}}]}`,
	`{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"choices":[]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}]} x`,
	`{"choices":[{"index":0,"delta":{"content":"a"}},]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}],}`,
	`{"ch\u006fices":[{"index":0,"delta":{"content":"escaped key"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop","extra":[true,false,null,-1.5e+3,"s",{}]}]}`,
	`null`,
	`[]`,
	`{"choices":[{"index":0,"delta":{"content":"tab	in string"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\x"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\u12"}}]}`,
}

func checkScanChunk(t *testing.T, data []byte) {
	var sc protocol.Scanner
	var got oaChunk
	if !scanChunk(&sc, data, &got, nil) {
		return
	}
	var want oaChunk
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%q: scanned, but json.Unmarshal fails: %v", data, err)
	}
	if len(got.Choices) == 0 && len(want.Choices) == 0 {
		got.Choices, want.Choices = nil, nil // reused or nil: the same to Decode
	}
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%q:\nscanned   %s\nunmarshal %s", data, gb, wb)
	}
}

// TestScanChunk runs the seeds, and checks that the scanner takes the
// frames a text stream is made of.
func TestScanChunk(t *testing.T) {
	for _, s := range scanSeeds {
		checkScanChunk(t, []byte(s))
	}
	for _, s := range scanSeeds[:2] {
		var sc protocol.Scanner
		if !scanChunk(&sc, []byte(s), &oaChunk{}, nil) {
			t.Errorf("%s: not scanned", s)
		}
	}
}

// FuzzChunkTemplate checks the chunk template (chunkTemplate) against the
// scanner: after a frame that makes a template, the template's prefix and
// suffix around any bytes decode, by the template or not, to the same
// events, error and stream state as the same two frames decoded with the
// template off. Seeded with every recorded frame and text strings that
// are not plain.
func FuzzChunkTemplate(f *testing.F) {
	mids := []string{`"x"`, `""`, `"a\nb \"q\" \u00e9 \ud83d\ude00 \/"`, `"\ud83d"`, `"caf` + "\xe9" + `"`,
		`"<b>&amp;</b>"`, ` "spaced" `, `null`, `1`, `"a","content":"b"`, `"a"},"finish_reason":"stop`, `"unterminated`, `"x"}]}`}
	for _, frame := range protocoltest.RecordedFrames(f, "testdata") {
		for _, mid := range mids {
			f.Add(frame, []byte(mid))
		}
	}
	for _, s := range scanSeeds {
		f.Add([]byte(s), []byte(`"x"`))
	}
	f.Fuzz(func(t *testing.T, frame, mid []byte) {
		checkTemplate(t, frame, mid)
	})
}

// checkTemplate decodes frame, and then frame's template around mid,
// with the template on and off, and fails t unless both give the same.
// It reports whether the second frame was decoded by the template.
func checkTemplate(t *testing.T, frame, mid []byte) bool {
	t.Helper()
	on, off := &openAIStream{}, &openAIStream{noTemplate: true}
	if _, _, err := on.Decode(protocol.SSEEvent{Data: frame}, nil); err != nil || on.tmpl.kind == textNone {
		return false
	}
	if _, _, err := off.Decode(protocol.SSEEvent{Data: frame}, nil); err != nil {
		t.Fatalf("%q: decoded with the template on, not off: %v", frame, err)
	}
	second := slices.Concat(on.tmpl.prefix, mid, on.tmpl.suffix)
	_, matched := on.tmpl.match(&protocol.Scanner{}, bytes.TrimSpace(second))
	gotEv, gotDone, gotErr := on.Decode(protocol.SSEEvent{Data: second}, nil)
	wantEv, wantDone, wantErr := off.Decode(protocol.SSEEvent{Data: second}, nil)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, want %v", second, gotErr, wantErr)
	}
	if !reflect.DeepEqual(gotEv, wantEv) || gotDone != wantDone {
		t.Fatalf("%q: events %+v (done %v), want %+v (done %v)", second, gotEv, gotDone, wantEv, wantDone)
	}
	if on.reason != off.reason || !reflect.DeepEqual(on.usage, off.usage) || on.tokens != off.tokens ||
		on.refusal != off.refusal || !reflect.DeepEqual(on.calls, off.calls) {
		t.Fatalf("%q: stream state differs with the template", second)
	}
	return matched
}

// TestChunkTemplate runs checkTemplate over the recorded frames, and
// checks that the template is what decodes the text frames of a stream,
// content and reasoning: every text delta of text.sse and reasoning.sse
// but the first of each kind, with the same events as the scanner's.
func TestChunkTemplate(t *testing.T) {
	matched := 0
	for _, frame := range protocoltest.RecordedFrames(t, "testdata") {
		for _, mid := range []string{`"x"`, `"\u00e9\n"`, `""`, `"a","content":"b"`, `1`} {
			if checkTemplate(t, frame, []byte(mid)) {
				matched++
			}
		}
	}
	if matched == 0 {
		t.Error("no recorded frame made a template")
	}
	for _, name := range []string{"text.sse", "reasoning.sse"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		on, off := streamEvents(t, raw, false), streamEvents(t, raw, true)
		if !reflect.DeepEqual(on, off) {
			t.Errorf("%s: events with the template\n%+v\nwithout\n%+v", name, on, off)
		}
	}
	// Decoded by the template: a stream of one chunk repeated with other
	// texts, as the bench mock sends.
	frame := `{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}`
	var sse strings.Builder
	for _, text := range []string{`"tok"`, `" tok"`, `"<\u00e9>"`, `""`, `"\ud83d\ude00"`} {
		fmt.Fprintf(&sse, "data: "+frame+"\n\n", text)
	}
	sse.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	s := &openAIStream{}
	var events []llm.Event
	hits := 0
	rd := protocol.NewSSEReader(strings.NewReader(sse.String()), protocol.MaxEventSize)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		if _, ok := s.tmpl.match(&protocol.Scanner{}, ev.Data); ok {
			hits++
		}
		events, _, err = s.Decode(ev, events)
		if err != nil {
			t.Fatal(err)
		}
	}
	if hits != 4 {
		t.Errorf("%d frames decoded by the template, want 4", hits)
	}
	want := []string{"tok", " tok", "<é>", "😀"}
	if len(events) != len(want) {
		t.Fatalf("events %+v", events)
	}
	for i, ev := range events {
		if ev.Type != llm.EventTextDelta || ev.Text != want[i] {
			t.Errorf("event %d: %+v, want text %q", i, ev, want[i])
		}
	}
}

// streamEvents decodes a recorded stream with the template on or off.
func streamEvents(t *testing.T, raw []byte, noTemplate bool) []llm.Event {
	t.Helper()
	s, err := protocol.DecodeStream(io.NopCloser(bytes.NewReader(raw)), &openAIStream{noTemplate: noTemplate})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []llm.Event
	for s.Next() {
		ev := s.Event()
		if ev.ToolCall != nil {
			ev.ToolCall = &llm.ToolCall{Name: ev.ToolCall.Name} // a new id each time
		}
		out = append(out, ev)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
