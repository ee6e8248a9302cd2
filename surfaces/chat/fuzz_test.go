package chat

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/llm"
)

// requestFiles returns the request bodies in testdata/requests/<dir>, by
// file name. Files named bad_*.json must be refused.
func requestFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "requests", dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no request files in testdata/requests/%s: %v", dir, err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

// decodeResponsesOnly decodes a Responses body with no sealer.
func decodeResponsesOnly(body []byte) (*llm.Request, error) {
	req, err := decodeResponses(context.Background(), nil, nil, body)
	return req, err
}

func TestDecode_RequestFiles(t *testing.T) {
	decoders := map[string]func([]byte) (*llm.Request, error){"chat": decodeChat, "responses": decodeResponsesOnly}
	for dir, decode := range decoders {
		for name, body := range requestFiles(t, dir) {
			t.Run(dir+"/"+name, func(t *testing.T) {
				_, err := decode(body)
				if strings.HasPrefix(name, "bad_") {
					badRequest(t, err, paramOf(err))
					return
				}
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
			})
		}
	}
}

func paramOf(err error) string {
	var e *llm.Error
	if errors.As(err, &e) {
		return e.Param
	}
	return ""
}

func FuzzDecodeChat(f *testing.F) {
	addChatSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecoder(t, decodeChat, body)
	})
}

// addChatSeeds seeds f with the chat request files and the decode tests'
// bodies, good and bad.
func addChatSeeds(f *testing.F) {
	for _, b := range requestFiles(f, "chat") {
		f.Add(b)
	}
	for _, tc := range chatDecodeCases {
		f.Add([]byte(tc.body))
	}
	for _, tc := range chatErrorCases {
		f.Add([]byte(tc.body))
	}
}

func FuzzDecodeResponses(f *testing.F) {
	for _, b := range requestFiles(f, "responses") {
		f.Add(b)
	}
	for _, tc := range responsesDecodeCases {
		f.Add([]byte(tc.body))
	}
	for _, tc := range responsesErrorCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecoder(t, decodeResponsesOnly, body)
	})
}

// checkDecoder holds for every input: decoding never panics and is
// deterministic; a failure is a 400 in the full envelope; a success is a
// request the pipeline can use.
func checkDecoder(t *testing.T, decode func([]byte) (*llm.Request, error), body []byte) {
	req1, err1 := decode(body)
	req2, err2 := decode(body)
	if d := cmp.Diff(req1, req2); d != "" {
		t.Fatalf("decoding is not deterministic:\n%s", d)
	}
	if (err1 == nil) != (err2 == nil) {
		t.Fatalf("decoding is not deterministic: %v vs %v", err1, err2)
	}
	if err1 != nil {
		var e1, e2 *llm.Error
		if !errors.As(err1, &e1) || !errors.As(err2, &e2) {
			t.Fatalf("error %v is not an *llm.Error", err1)
		}
		if e1.Kind != llm.KindInvalidRequest || e1.Message == "" {
			t.Fatalf("error %+v is not an invalid_request with a message", e1)
		}
		if e1.Kind != e2.Kind || e1.Param != e2.Param || e1.Message != e2.Message {
			t.Fatalf("errors differ: %+v vs %+v", e1, e2)
		}
		rec := httptest.NewRecorder()
		WriteError(rec, err1)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d", rec.Code)
		}
		env := writeErrorEnvelope(t, err1)
		if len(env.Keys) != 4 {
			t.Fatalf("envelope keys %v", env.Keys)
		}
		return
	}
	if req1.Model == "" || len(req1.Messages) == 0 && len(req1.System) == 0 {
		t.Fatalf("decoded a request without model or messages: %+v", req1)
	}
	for i, m := range req1.Messages {
		if m.Role != llm.RoleUser && m.Role != llm.RoleAssistant {
			t.Fatalf("message %d has role %q", i, m.Role)
		}
		if len(m.Parts) == 0 {
			t.Fatalf("message %d has no parts", i)
		}
		for _, p := range m.Parts {
			if p.Type == llm.PartToolCall && (p.ToolCall == nil || p.ToolCall.ID == "" || p.ToolCall.Name == "") ||
				p.Type == llm.PartToolResult && p.ToolResult == nil {
				t.Fatalf("message %d has an incomplete tool part %+v", i, p)
			}
		}
	}
	if req1.N > 1 || req1.MaxTokens < 0 || len(req1.Stop) > 4 {
		t.Fatalf("decoded out-of-range controls: n %d max_tokens %d stop %q", req1.N, req1.MaxTokens, req1.Stop)
	}
	_ = req1.InputTokens() // the classifier and the fixture count every decoded request
}
