package chat

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/llm"
)

func TestCodec_DecodeEmbed(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       *llm.EmbedRequest
		base64     bool
	}{
		{"a string", `{"model":"text-embedding-3-small","input":"hello"}`,
			&llm.EmbedRequest{Model: "text-embedding-3-small", Inputs: []llm.EmbedInput{{Text: "hello"}}, DefaultDimensions: 1536}, false},
		{"strings, dimensions, user, base64", `{"model":"m","input":["a","b"],"dimensions":256,"user":"u-1","encoding_format":"base64"}`,
			&llm.EmbedRequest{Model: "m", Inputs: []llm.EmbedInput{{Text: "a"}, {Text: "b"}}, Dimensions: 256, User: "u-1", DefaultDimensions: 1536}, true},
		{"token ids", `{"model":"m","input":[1,2,3],"encoding_format":"float"}`,
			&llm.EmbedRequest{Model: "m", Inputs: []llm.EmbedInput{{Tokens: []int{1, 2, 3}}}, DefaultDimensions: 1536}, false},
		{"arrays of token ids", `{"model":"m","input":[[1],[2,3]]}`,
			&llm.EmbedRequest{Model: "m", Inputs: []llm.EmbedInput{{Tokens: []int{1}}, {Tokens: []int{2, 3}}}, DefaultDimensions: 1536}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, reply, err := Codec{}.DecodeEmbed(nil, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, req); d != "" {
				t.Errorf("request (-want +got):\n%s", d)
			}
			if got := reply.(embedReply).base64; got != tc.base64 {
				t.Errorf("base64 = %v, want %v", got, tc.base64)
			}
		})
	}
}

func TestCodec_DecodeEmbed_errors(t *testing.T) {
	for _, tc := range []struct{ name, body, param, msg string }{
		{"no model", `{"input":"x"}`, "model", "model is required"},
		{"no input", `{"model":"m"}`, "input", "input is required"},
		{"null input", `{"model":"m","input":null}`, "input", "got null"},
		{"empty string", `{"model":"m","input":""}`, "input", "input[0] is empty"},
		{"empty array", `{"model":"m","input":[]}`, "input", "must not be an empty array"},
		{"an empty token array", `{"model":"m","input":[[1],[]]}`, "input", "input[1] is empty"},
		{"mixed array", `{"model":"m","input":["a",1]}`, "input", "input must be a string, an array of strings"},
		{"an object", `{"model":"m","input":{"a":1}}`, "input", "expected a string, an array of strings"},
		{"a negative token", `{"model":"m","input":[-1]}`, "input", "not a token id"},
		{"too many", `{"model":"m","input":[` + strings.Repeat(`"a",`, 2048) + `"a"]}`, "input", "2049 inputs; an embeddings request takes at most 2048"},
		{"too long", `{"model":"m","input":"` + strings.Repeat("w ", 9000) + `"}`, "input", "at most 8192 tokens"},
		{"too much in all", `{"model":"m","input":[` + strings.Repeat(`"`+strings.Repeat("w ", 4000)+`",`, 80) + `"a"]}`, "input", "at most 300000 tokens in all"},
		{"zero dimensions", `{"model":"m","input":"x","dimensions":0}`, "dimensions", "expected a value from 1 to 8192"},
		{"huge dimensions", `{"model":"m","input":"x","dimensions":100000}`, "dimensions", "expected a value from 1 to 8192"},
		{"unknown encoding", `{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format", "expected 'float' or 'base64'"},
		{"not JSON", `{"model":`, "", "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Codec{}.DecodeEmbed(nil, []byte(tc.body))
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *llm.Error", err)
			}
			if e.Kind != llm.KindInvalidRequest || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %s %q %q, want invalid_request %q containing %q", e.Kind, e.Param, e.Message, tc.param, tc.msg)
			}
		})
	}
}

func TestEmbedReply_WriteEmbeddings(t *testing.T) {
	resp := &llm.Embeddings{Vectors: [][]float32{{0.5, -0.25}, {1, 1e-7}}, Usage: llm.Usage{InputTokens: 7}}
	for _, tc := range []struct {
		name  string
		reply embedReply
		want  string
	}{
		{"floats", embedReply{},
			`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]},{"object":"embedding","index":1,"embedding":[1,1e-07]}],"model":"caller-model","usage":{"prompt_tokens":7,"total_tokens":7}}` + "\n"},
		// 0.5 is 0x3f000000 and -0.25 0xbe800000, little-endian.
		{"base64", embedReply{base64: true},
			`{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAPwAAgL4="},{"object":"embedding","index":1,"embedding":"AACAP5W/1jM="}],"model":"caller-model","usage":{"prompt_tokens":7,"total_tokens":7}}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if err := tc.reply.WriteEmbeddings(w, "caller-model", resp); err != nil {
				t.Fatal(err)
			}
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
			}
			if d := cmp.Diff(tc.want, w.Body.String()); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
		})
	}
}

func FuzzDecodeEmbed(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"x"}`, `{"model":"m","input":[[1,2],[3]],"dimensions":3}`, `{"model":"m","input":["a",""]}`, `{"input":[1,"a"]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, reply, err := Codec{}.DecodeEmbed(nil, []byte(body))
		if err != nil {
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindInvalidRequest {
				t.Fatalf("err = %v, want an invalid_request *llm.Error", err)
			}
			return
		}
		if req.Model == "" || len(req.Inputs) == 0 || len(req.Inputs) > MaxEmbedInputs || reply == nil {
			t.Fatalf("accepted %q as %+v", body, req)
		}
	})
}
