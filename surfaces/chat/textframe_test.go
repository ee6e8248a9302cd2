package chat

import (
	"bytes"
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
