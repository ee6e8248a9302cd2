package chat

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// FuzzTextFrame checks that a text delta written from its frame template
// is byte for byte the frame encoding the whole chunk writes, for any
// text, model and id, with and without include_usage, content and
// reasoning alike; and so are the role and finish chunks cut from the
// content delta's template.
func FuzzTextFrame(f *testing.F) {
	f.Add("svc-fusion", "chatcmpl-golden", " patient", true)
	f.Add(`m"{"content":""}`, `id{"reasoning":""}\`, "<b>&\u2028\xff\n", false)
	f.Add("", "", "", true)
	f.Fuzz(func(t *testing.T, model, id, text string, includeUsage bool) {
		req := &llm.Request{Model: model, Stream: true, IncludeUsage: includeUsage}
		fast := Codec{}.NewStream(req, id, time.Unix(1767225600, 0)).(*Stream)
		slow := Codec{}.NewStream(req, id, time.Unix(1767225600, 0)).(*Stream)
		// The role chunk, cut from the content delta's template.
		var gotStart, wantStart bytes.Buffer
		if err := fast.Start(&gotStart); err != nil {
			t.Fatal(err)
		}
		if err := slow.delta(&wantStart, chunkDelta{Role: "assistant"}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotStart.Bytes(), wantStart.Bytes()) {
			t.Fatalf("Start:\n%s\nencoder:\n%s", gotStart.Bytes(), wantStart.Bytes())
		}
		// The finish chunk, cut from the same template, for a reason that
		// may need escaping (text stands in for it).
		for _, reason := range []string{"stop", "length", text} {
			fast.finish, slow.finish = reason, reason
			var got, want bytes.Buffer
			if err := fast.finishFrame(&got); err != nil {
				t.Fatal(err)
			}
			slow.choice[0] = chunkChoice{FinishReason: &slow.finish}
			if err := slow.frame(&want, slow.choice[:], nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("finish:\n%s\nencoder:\n%s", got.Bytes(), want.Bytes())
			}
		}
		for _, reasoning := range []bool{false, true} {
			for range 2 { // the template's first use and a later one
				var got, want bytes.Buffer
				if err := fast.textDelta(&got, reasoning, text); err != nil {
					t.Fatal(err)
				}
				d := chunkDelta{Content: &text}
				if reasoning {
					d = chunkDelta{Reasoning: &text}
				}
				if err := slow.delta(&want, d); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("template:\n%s\nencoder:\n%s", got.Bytes(), want.Bytes())
				}
			}
		}
	})
}

// FuzzUsageFrame checks that the usage chunk, built by hand, is byte for
// byte the frame encoding it writes, for any model, id, creation time and
// counts.
func FuzzUsageFrame(f *testing.F) {
	f.Add("svc-fusion", "chatcmpl-golden", int64(1767225600), 12, 16, 3, 0, 5)
	f.Add(`m"<&>`+"\u2028\xff", `id\`, int64(-1), -1, 1<<62, 0, -7, 0)
	f.Add("", "", int64(0), 0, 0, 0, 0, 0)
	f.Fuzz(func(t *testing.T, model, id string, created int64, in, out, cached, write, reasoning int) {
		req := &llm.Request{Model: model, Stream: true, IncludeUsage: true}
		fast := Codec{}.NewStream(req, id, time.Unix(created, 0)).(*Stream)
		slow := Codec{}.NewStream(req, id, time.Unix(created, 0)).(*Stream)
		u := usageOf(llm.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: cached, CacheCreationTokens: write, ReasoningTokens: reasoning})
		var got, want bytes.Buffer
		if err := fast.usageFrame(&got, u); err != nil {
			t.Fatal(err)
		}
		if err := slow.frame(&want, []chunkChoice{}, u); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("usage frame:\n%s\nencoder:\n%s", got.Bytes(), want.Bytes())
		}
	})
}

// FuzzResponsesDelta checks that a Responses delta event written by hand
// (ResponsesStream.delta) is byte for byte the one emit writes through
// encoding/json, for each item type and any text, id, output index and
// sequence number.
func FuzzResponsesDelta(f *testing.F) {
	f.Add(uint8(0), "msg_0123_0", " patient", 0, 3)
	f.Add(uint8(1), `rs_"x"_1`, "<b>&\u2028\xff\n", 7, 1<<20)
	f.Add(uint8(2), "fc_<a>_2", `{"path":"a\\b"}`, 12, 99)
	f.Fuzz(func(t *testing.T, kind uint8, id, text string, item, seq int) {
		typ := [...]string{"message", "reasoning", "function_call"}[kind%3]
		fast := &ResponsesStream{item: item, seq: seq}
		slow := &ResponsesStream{item: item, seq: seq}
		for range 2 { // the frame's buffer reused
			var got, want bytes.Buffer
			if err := fast.delta(&got, typ, id, text); err != nil {
				t.Fatal(err)
			}
			if err := referenceDelta(slow, &want, typ, id, text); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("by hand:\n%s\nencoding/json:\n%s", got.Bytes(), want.Bytes())
			}
		}
	})
}

// referenceDelta is the delta event as emit writes it.
func referenceDelta(s *ResponsesStream, w io.Writer, typ, id, text string) error {
	switch typ {
	case "message":
		return s.emit(w, "response.output_text.delta", map[string]any{"item_id": id, "output_index": s.item, "content_index": 0, "delta": text, "logprobs": []struct{}{}})
	case "reasoning":
		return s.emit(w, "response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": s.item, "summary_index": 0, "delta": text})
	}
	return s.emit(w, "response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": s.item, "delta": text})
}
