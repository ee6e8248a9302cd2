package gencontent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/svcgw/svcgw/internal/testfill"
	"github.com/svcgw/svcgw/llm"
)

// FuzzFrame checks that a chunk's frame written by encode is byte for byte
// what encoding/json writes for the same generateContentResponse: parts of
// every kind (text, thought, signature, and the ones the encoder writes),
// any finish reason, usage with and without its optional counts, and any
// model and id.
func FuzzFrame(f *testing.F) {
	f.Add("gemini-2.5-flash", "gw-golden", " patient", "STOP", uint16(0x1f), uint8(3))
	f.Add(`m"text":"x"`, `"id"\`, "<b>&\u2028\xff\n", "", uint16(0xffff), uint8(0))
	f.Add("", "", "", "MAX_TOKENS", uint16(0x2a5), uint8(9))
	f.Fuzz(func(t *testing.T, model, id, text, finish string, kinds uint16, n uint8) {
		parts := make([]part, int(n)%6)
		for i := range parts {
			parts[i] = fuzzPart(text, kinds>>(2*i))
		}
		var u *usageMetadata
		if kinds&0x8000 == 0 {
			u = &usageMetadata{PromptTokenCount: int(n), CandidatesTokenCount: len(text), TotalTokenCount: int(n) + len(text)}
			if kinds&0x4000 != 0 {
				u.CachedContentTokenCount = int(kinds >> 12)
				u.ThoughtsTokenCount = int(n) * 7
			}
		}
		s := newStream(&llm.Request{Model: model}, id)
		for range 2 { // the buffers reused
			if err := s.encode(parts, finish, u); err != nil {
				t.Fatal(err)
			}
			want := referenceFrame(t, model, id, parts, finish, u)
			if !bytes.Equal(s.frame, want) {
				t.Fatalf("encode:\n%s\nencoding/json:\n%s", s.frame, want)
			}
		}
	})
}

// TestFrame_EveryMember checks encode against encoding/json with every
// member of a part and of the usage set (testfill.FillNonZero), so that a
// member added to either type and not to encode fails here.
func TestFrame_EveryMember(t *testing.T) {
	var p part
	testfill.FillNonZero(reflect.ValueOf(&p).Elem())
	textual := part{Text: p.Text, Thought: p.Thought, ThoughtSignature: p.ThoughtSignature}
	var u usageMetadata
	testfill.FillNonZero(reflect.ValueOf(&u).Elem())
	s := newStream(&llm.Request{Model: "m"}, "id")
	parts := []part{p, textual}
	if err := s.encode(parts, "STOP", &u); err != nil {
		t.Fatal(err)
	}
	if want := referenceFrame(t, "m", "id", parts, "STOP", &u); !bytes.Equal(s.frame, want) {
		t.Fatalf("encode:\n%s\nencoding/json:\n%s", s.frame, want)
	}
}

// fuzzPart is a part of the kind two bits choose: text, a thought with a
// signature, a function call, or an empty part.
func fuzzPart(text string, bits uint16) part {
	switch bits & 3 {
	case 0:
		return part{Text: text}
	case 1:
		return part{Text: text, Thought: true, ThoughtSignature: "c2ln"}
	case 2:
		args, _ := json.Marshal(map[string]string{"q": text})
		return part{ThoughtSignature: "c2ln", FunctionCall: &functionCall{ID: text, Name: "f<&>", Args: args}}
	default:
		return part{}
	}
}

// referenceFrame is the frame encoding/json writes for the chunk.
func referenceFrame(t *testing.T, model, id string, parts []part, finish string, u *usageMetadata) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("data: ")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	resp := generateContentResponse{
		Candidates:    []candidate{{Content: content{Role: "model", Parts: parts}, FinishReason: finish}},
		UsageMetadata: u,
		ModelVersion:  model,
		ResponseID:    id,
	}
	if err := enc.Encode(&resp); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}
