package gencontent

import (
	"bytes"
	"testing"

	"github.com/svcgw/svcgw/llm"
)

// FuzzTextFrame checks that a chunk of one text or thought part written
// from its template is byte for byte the frame encoding the whole chunk
// writes, for any text, model and id, the template's first use and later
// ones.
func FuzzTextFrame(f *testing.F) {
	f.Add("gemini-2.5-flash", "gw-golden", " patient", false)
	f.Add(`m"text":"x"`, `"text":"x"\`, "<b>&\u2028\xff\n", true)
	f.Fuzz(func(t *testing.T, model, id, text string, thought bool) {
		if text == "" {
			return // not a part writeChunk sends this way
		}
		fast := newStream(&llm.Request{Model: model}, id)
		slow := newStream(&llm.Request{Model: model}, id)
		for range 2 {
			var got, want bytes.Buffer
			if err := fast.writeChunk(&got, []part{{Text: text, Thought: thought}}, "", nil); err != nil {
				t.Fatal(err)
			}
			if err := slow.encode([]part{{Text: text, Thought: thought}}, "", nil); err != nil {
				t.Fatal(err)
			}
			want.Write(slow.frame)
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("template:\n%s\nencoder:\n%s", got.Bytes(), want.Bytes())
			}
		}
	})
}
