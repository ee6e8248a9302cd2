package messages

import (
	"bytes"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// FuzzTextFrame checks that a delta written from its frame template is
// byte for byte the frame encoding the whole event writes, for any text,
// block index and delta type, the template's first use and later ones.
func FuzzTextFrame(f *testing.F) {
	f.Add(" patient", 0, uint8(0))
	f.Add(`<b>&"}}""}}`+"\u2028\xff\n", 3, uint8(1))
	f.Add("", 1, uint8(2))
	f.Fuzz(func(t *testing.T, text string, idx int, kind uint8) {
		fast := newStream(&llm.Request{Model: "svc-fusion"}, "msg_golden", time.Unix(1767225600, 0))
		slow := newStream(&llm.Request{Model: "svc-fusion"}, "msg_golden", time.Unix(1767225600, 0))
		for i := range 4 {
			typ := []string{"text_delta", "thinking_delta", "input_json_delta"}[(int(kind)+i/2)%3]
			var got, want bytes.Buffer
			if err := fast.textDelta(&got, idx+i/2, typ, text); err != nil {
				t.Fatal(err)
			}
			d := contentDelta{Type: typ}
			switch typ {
			case "text_delta":
				d.Text = &text
			case "thinking_delta":
				d.Thinking = &text
			default:
				d.PartialJSON = &text
			}
			if err := slow.delta(&want, idx+i/2, d); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("template:\n%s\nencoder:\n%s", got.Bytes(), want.Bytes())
			}
		}
	})
}
