package gencontent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// embedCall is a request to …/models/{rest}, routed as the server does.
func embedCall(rest string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1beta/models/"+rest, nil)
	r.SetPathValue("rest", rest)
	return r
}

func TestCodec_DecodeEmbed(t *testing.T) {
	for _, tc := range []struct {
		name, rest, body string
		want             *llm.EmbedRequest
		batch            bool
	}{
		{"embedContent", "text-embedding-004:embedContent",
			`{"content":{"parts":[{"text":"hello"},{"text":"world"}]},"taskType":"RETRIEVAL_QUERY","outputDimensionality":64}`,
			&llm.EmbedRequest{Model: "text-embedding-004", Inputs: []llm.EmbedInput{{Text: "hello\nworld"}}, TaskType: "RETRIEVAL_QUERY", Dimensions: 64, DefaultDimensions: 768}, false},
		{"batchEmbedContents, as the Gen AI SDKs send it", "models/gemini-embedding-001:batchEmbedContents",
			`{"requests":[{"model":"models/gemini-embedding-001","content":{"role":"user","parts":[{"text":"a"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"T"},` +
				`{"model":"models/gemini-embedding-001","content":{"role":"user","parts":[{"text":"b"}]},"taskType":"RETRIEVAL_DOCUMENT","title":"T"}]}`,
			&llm.EmbedRequest{Model: "gemini-embedding-001", Inputs: []llm.EmbedInput{{Text: "a"}, {Text: "b"}}, TaskType: "RETRIEVAL_DOCUMENT", Title: "T", DefaultDimensions: 768}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, reply, err := Codec{}.DecodeEmbed(embedCall(tc.rest), []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, req); d != "" {
				t.Errorf("request (-want +got):\n%s", d)
			}
			if got := reply.(embedReply).batch; got != tc.batch {
				t.Errorf("batch = %v, want %v", got, tc.batch)
			}
		})
	}
}

func TestCodec_DecodeEmbed_errors(t *testing.T) {
	many := strings.Repeat(`{"content":{"parts":[{"text":"a"}]}},`, 100) + `{"content":{"parts":[{"text":"a"}]}}`
	for _, tc := range []struct{ name, method, body, param, msg string }{
		{"no content", "embedContent", `{}`, "content", "content to embed is required"},
		{"empty text", "embedContent", `{"content":{"parts":[{"text":" "}]}}`, "content.parts", "text to embed is empty"},
		{"a file", "embedContent", `{"content":{"parts":[{"fileData":{"fileUri":"x"}}]}}`, "content.parts", "only text parts"},
		{"a bad task type", "embedContent", `{"content":{"parts":[{"text":"a"}]},"taskType":"X"}`, "taskType", "TaskType"},
		{"no dimensions", "embedContent", `{"content":{"parts":[{"text":"a"}]},"outputDimensionality":0}`, "outputDimensionality", "must be from 1 to 8192"},
		{"not an object", "embedContent", `[]`, "", "expected an object"},
		{"no requests", "batchEmbedContents", `{}`, "requests", "at least one request"},
		{"101 requests", "batchEmbedContents", `{"requests":[` + many + `]}`, "requests", "at most 100 requests can be in one batch (got 101)"},
		{"requests that differ", "batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"a"}]},"title":"x"},{"content":{"parts":[{"text":"b"}]}}]}`, "requests", "request 1 differs"},
		{"a request without content", "batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"a"}]}},{}]}`, "requests[].content", "content to embed is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Codec{}.DecodeEmbed(embedCall("m:"+tc.method), []byte(tc.body))
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
	resp := &llm.Embeddings{Vectors: [][]float32{{0.5, -0.25}, {0.1, 2}}, Usage: llm.Usage{InputTokens: 3}}
	for _, tc := range []struct {
		name  string
		batch bool
		want  string
	}{
		{"embedContent", false, `{"embedding":{"values":[0.5,-0.25]}}` + "\n"},
		{"batchEmbedContents", true, `{"embeddings":[{"values":[0.5,-0.25]},{"values":[0.1,2]}]}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if err := (embedReply{batch: tc.batch}).WriteEmbeddings(w, "m", resp); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, w.Body.String()); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
		})
	}
}

func TestPickMethod_Embeddings(t *testing.T) {
	for _, m := range []string{MethodEmbed, MethodBatchEmbed} {
		e, err := pickMethod(embedCall("m:" + m))
		if err != nil || e != surface.Embed {
			t.Errorf("%s: %v, %v", m, e, err)
		}
	}
}

func FuzzDecodeEmbed(f *testing.F) {
	f.Add("embedContent", `{"content":{"parts":[{"text":"a"}]},"outputDimensionality":3}`)
	f.Add("batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]}}]}`)
	f.Fuzz(func(t *testing.T, method, body string) {
		if method != MethodEmbed && method != MethodBatchEmbed {
			return
		}
		req, reply, err := Codec{}.DecodeEmbed(embedCall("m:"+method), []byte(body))
		if err != nil {
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindInvalidRequest {
				t.Fatalf("err = %v, want an invalid_request *llm.Error", err)
			}
			return
		}
		if len(req.Inputs) == 0 || len(req.Inputs) > MaxBatchEmbed || reply == nil {
			t.Fatalf("accepted %q as %+v", body, req)
		}
	})
}
