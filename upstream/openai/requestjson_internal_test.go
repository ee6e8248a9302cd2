package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/svcgw/svcgw/internal/testfill"

	"github.com/svcgw/svcgw/upstream/internal/protocol"
)

// fuzzRequest builds a request from fuzzed values: flags pick the
// optional fields and the shapes of the messages' content.
func fuzzRequest(model, text, other string, flags uint64, f1, f2 float64, n int, seed int64) *oaRequest {
	bit := func(i uint) bool { return flags&(1<<i) != 0 }
	r := &oaRequest{Model: model}
	if !bit(0) {
		r.Messages = []oaMessage{}
	}
	if bit(1) {
		r.Messages = append(r.Messages, oaMessage{Role: "system", Content: text})
	}
	if bit(2) {
		r.Messages = append(r.Messages, oaMessage{Role: other, Content: []oaPart{{Type: "text", Text: text}, {Type: "text"}}})
	}
	if bit(3) {
		r.Messages = append(r.Messages, oaMessage{Role: "user", Content: []oaPart{
			{Type: "image_url", ImageURL: &oaImageURL{URL: other}},
			{Type: "file", File: &oaFile{Filename: text, FileData: other}},
			{Type: "file", File: &oaFile{FileData: text}},
		}})
	}
	if bit(4) {
		r.Messages = append(r.Messages, oaMessage{Role: "assistant", ToolCalls: []oaToolCall{
			{ID: text, Type: "function", Function: oaFunctionCall{Name: other, Arguments: `{"a":"` + text + `"}`}},
			{ID: other, Type: "function", Function: oaFunctionCall{Name: text}},
		}})
	}
	if bit(5) {
		r.Messages = append(r.Messages, oaMessage{Role: "tool", ToolCallID: other, Content: ""})
	}
	if bit(6) {
		r.Messages = append(r.Messages, oaMessage{Role: "user", Content: []oaPart(nil)}, oaMessage{Role: "user", Content: []oaPart{}}, oaMessage{Role: "user"})
	}
	if bit(7) {
		r.Temperature = &f1
	}
	if bit(8) {
		r.TopP = &f2
	}
	if bit(9) {
		r.PresencePenalty = &f1
	}
	if bit(10) {
		r.FrequencyPenalty = &f2
	}
	if bit(11) {
		r.Seed = &seed
	}
	if bit(12) {
		r.MaxCompletionTokens = n
	}
	if bit(13) {
		r.MaxTokens = n
	}
	if bit(14) {
		r.Stop = []string{text, other}
	}
	if bit(15) {
		r.Stop = []string{}
	}
	if bit(16) {
		r.User, r.PromptCacheKey, r.ReasoningEffort = text, other, text
	}
	if bit(17) {
		r.Stream, r.StreamOptions = true, &oaStreamOptions{IncludeUsage: true}
	}
	if bit(18) {
		r.StreamOptions = &oaStreamOptions{}
	}
	if bit(19) {
		b := bit(20)
		r.ParallelToolCalls = &b
	}
	if bit(21) {
		r.Messages = append(r.Messages, oaMessage{Role: "user", Content: 42}) // not a shape appendJSON writes
	}
	if bit(22) {
		r.Tools = []oaTool{{Type: "function", Function: oaFunction{Name: text, Parameters: json.RawMessage(`{ "type" : "object" }`)}}}
		r.ToolChoice = json.RawMessage(`"auto"`)
	}
	if bit(23) {
		r.ResponseFormat = &oaResponseFormat{Type: "json_object"}
	}
	if bit(24) {
		r.LogitBias = map[string]float64{text: f1, other: f2}
	}
	return r
}

func checkRequestJSON(t *testing.T, r *oaRequest) {
	t.Helper()
	want, wantErr := protocol.EncodeJSON(r)
	got, ok := r.appendJSON([]byte("x"))
	if !ok {
		if wantErr == nil && r.Tools == nil && r.ToolChoice == nil && r.ResponseFormat == nil && r.LogitBias == nil && !hasOtherContent(r) {
			t.Fatalf("appendJSON gave up on a request EncodeJSON writes: %s", want)
		}
		return
	}
	if wantErr != nil {
		t.Fatalf("appendJSON wrote %s, EncodeJSON fails: %v", got[1:], wantErr)
	}
	if got[0] != 'x' || !bytes.Equal(got[1:], want) {
		t.Fatalf("appendJSON wrote\n%s\nEncodeJSON\n%s", got[1:], want)
	}
}

func hasOtherContent(r *oaRequest) bool {
	for _, m := range r.Messages {
		switch m.Content.(type) {
		case nil, string, []oaPart:
		default:
			return true
		}
	}
	return false
}

var requestJSONStrings = []string{"", "gpt-4.1", "<b>&amp;</b>", "quote \" back \\ slash", "\b\f\n\r\t\x00\x1f\x7f",
	"caf\xe9", "\u2028\u2029", "é 中文 😀", "\xed\xa0\x80"}

var requestJSONFloats = []float64{0, 0.7, 1, 2, -1.5, 1e-7, 1e21, 1.0 / 3, math.Copysign(0, -1), math.NaN(), math.Inf(1)}

// TestRequestJSON checks appendJSON against EncodeJSON on every optional
// field and content shape, alone and all together, with awkward texts and
// numbers; the recorded requests' bodies are the golden tests'.
func TestRequestJSON(t *testing.T) {
	for i := range 26 {
		for _, s := range requestJSONStrings {
			for _, f := range requestJSONFloats {
				checkRequestJSON(t, fuzzRequest(s, s, "other "+s, 1<<i, f, 0.5, 256, -3))
				checkRequestJSON(t, fuzzRequest(s, s, s, 1<<i|0x3fffe&^(1<<15|1<<18), f, f, -1, math.MaxInt64))
			}
		}
	}
	// The usual request goes the quick way.
	r := fuzzRequest("m", "hi", "user", 1<<1|1<<2|1<<7|1<<12|1<<17, 0.7, 0, 64, 0)
	if _, ok := r.appendJSON(nil); !ok {
		t.Error("appendJSON gave up on a plain request")
	}
}

// FuzzRequestJSON checks appendJSON against EncodeJSON.
func FuzzRequestJSON(f *testing.F) {
	for i, s := range requestJSONStrings {
		f.Add(s, s, "user", uint64(1)<<(i%26)|0x20006, requestJSONFloats[i], 0.5, 64, int64(i))
	}
	f.Fuzz(func(t *testing.T, model, text, other string, flags uint64, f1, f2 float64, n int, seed int64) {
		checkRequestJSON(t, fuzzRequest(model, text, other, flags, f1, f2, n, seed))
	})
}

// TestRequestJSON_EveryField sets each field of a request, and of a
// message, to a value that is not its zero (what a field holds filled
// wholly, nested structs included), one field at a time, and checks
// appendJSON against EncodeJSON: a field added to oaRequest, oaMessage or
// a type they hold that appendJSON does not write fails here, whether or
// not the fuzz corpus ever sets it.
func TestRequestJSON_EveryField(t *testing.T) {
	base := func() *oaRequest {
		return &oaRequest{Model: "m", Messages: []oaMessage{{Role: "user", Content: "hi"}}}
	}
	rt := reflect.TypeFor[oaRequest]()
	for i := range rt.NumField() {
		t.Run(rt.Field(i).Name, func(t *testing.T) {
			r := base()
			testfill.FillNonZero(reflect.ValueOf(r).Elem().Field(i))
			checkRequestJSON(t, r)
		})
	}
	mt := reflect.TypeFor[oaMessage]()
	for i := range mt.NumField() {
		t.Run("oaMessage."+mt.Field(i).Name, func(t *testing.T) {
			r := base()
			testfill.FillNonZero(reflect.ValueOf(&r.Messages[0]).Elem().Field(i))
			checkRequestJSON(t, r)
		})
	}
	t.Run("oaPart", func(t *testing.T) {
		var p oaPart
		testfill.FillNonZero(reflect.ValueOf(&p).Elem())
		r := base()
		r.Messages[0].Content = []oaPart{p}
		checkRequestJSON(t, r)
	})
}
