package messages

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// requestCases lists testdata/decode/<case>.json, the request bodies whose
// canonical decoding is golden in testdata/decode/<case>.golden.json.
func requestCases(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "decode", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := make(map[string][]byte)
	for _, p := range paths {
		if strings.HasSuffix(p, ".golden.json") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cases[strings.TrimSuffix(filepath.Base(p), ".json")] = b
	}
	if len(cases) == 0 {
		t.Fatal("no request cases in testdata/decode")
	}
	return cases
}

// canonicalJSON renders a canonical request for golden files: its JSON with
// null, empty and false members dropped, so each golden shows what was set.
func canonicalJSON(t *testing.T, req *llm.Request) []byte {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(prune(v))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keep lists members shown even when false or empty: raw JSON (schemas,
// arguments) is shown whole, and these booleans mean something when false.
var keep = map[string]bool{"Parameters": true, "Schema": true, "Arguments": true, "ParallelToolCalls": true, "Enabled": true}

func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if keep[k] && e != nil {
				continue
			}
			if e = prune(e); e == nil {
				delete(x, k)
			} else {
				x[k] = e
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		for i, e := range x {
			x[i] = prune(e)
			if x[i] == nil {
				x[i] = map[string]any{}
			}
		}
		if len(x) == 0 {
			return nil
		}
	case string:
		if x == "" {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	}
	return v
}

func TestCodec_DecodeRequest(t *testing.T) {
	for name, body := range requestCases(t) {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			req, err := Codec{}.DecodeRequest(httptest.NewRequest("POST", "/v1/messages", nil), body)
			is.NoErr(err) // decode
			goldenJSON(t, filepath.Join("decode", name+".golden.json"), canonicalJSON(t, req))
		})
	}
}

func TestCodec_DecodeRequest_invalid(t *testing.T) {
	const pdf = `"source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}`
	msgs := func(content string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":` + content + `}]}`
	}
	with := func(extra string) string {
		return `{"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}],` + extra + `}`
	}
	tests := []struct {
		name  string
		body  string
		param string
	}{
		{"malformed JSON", `{"model":`, ""},
		{"body is an array", `[]`, ""},
		{"model missing", `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"model not a string", `{"model":7,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"model empty", `{"model":"","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"model null", `{"model":null,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"max_tokens missing", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens a string", `{"model":"m","max_tokens":"10","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens fractional", `{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens huge", `{"model":"m","max_tokens":1e40,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"messages missing", `{"model":"m","max_tokens":10}`, "messages"},
		{"messages an object", `{"model":"m","max_tokens":10,"messages":{}}`, "messages"},
		{"messages empty", `{"model":"m","max_tokens":10,"messages":[]}`, "messages"},
		{"message not an object", `{"model":"m","max_tokens":10,"messages":["hi"]}`, "messages.0"},
		{"role missing", `{"model":"m","max_tokens":10,"messages":[{"content":"hi"}]}`, "messages.0.role"},
		{"system messages only", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`, "messages"},
		{"system message with a tool_use block", msgs(`"hi"},{"role":"system","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]`), "messages.1.content.0.type"},
		{"system message clear_at unknown", msgs(`"hi"},{"role":"system","content":"x","clear_at":"never"`), "messages.1.clear_at"},
		{"system message effort unknown", msgs(`"hi"},{"role":"system","content":[],"output_config":{"effort":"extreme"}`), "messages.1.output_config.effort"},
		{"tool_removal by definition", msgs(`"hi"},{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_definition","definition":{"name":"f","input_schema":{}}}}]`), "messages.1.content.0.tool.type"},
		{"role tool", `{"model":"m","max_tokens":10,"messages":[{"role":"tool","content":"hi"}]}`, "messages.0.role"},
		{"content missing", `{"model":"m","max_tokens":10,"messages":[{"role":"user"}]}`, "messages.0.content"},
		{"content a number", msgs(`5`), "messages.0.content"},
		{"content empty string", msgs(`""`), "messages.0.content"},
		{"content empty array", msgs(`[]`), "messages.0.content"},
		{"only an empty assistant turn", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":""}]}`, "messages.0.content"},
		{"empty assistant turn before the last", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[]},{"role":"user","content":"b"}]}`, "messages.1.content"},
		{"block not an object", msgs(`["hi"]`), "messages.0.content.0"},
		{"block type missing", msgs(`[{"text":"hi"}]`), "messages.0.content.0.type"},
		{"block type unknown", msgs(`[{"type":"audio","data":"x"}]`), "messages.0.content.0.type"},
		{"server tool result block", msgs(`[{"type":"web_search_tool_result","tool_use_id":"x","content":[]}]`), "messages.0.content.0.type"},
		{"text missing", msgs(`[{"type":"text"}]`), "messages.0.content.0.text"},
		{"text empty", msgs(`[{"type":"text","text":""}]`), "messages.0.content.0.text"},
		{"text not a string", msgs(`[{"type":"text","text":["a"]}]`), "messages.0.content.0.text"},
		{"image source missing", msgs(`[{"type":"image"}]`), "messages.0.content.0.source"},
		{"image media type", msgs(`[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]`), "messages.0.content.0.source.media_type"},
		{"image bad base64", msgs(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"not base64!"}}]`), "messages.0.content.0.source.data"},
		{"image URL-safe base64", msgs(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"-_-_"}}]`), "messages.0.content.0.source.data"},
		{"image data missing", msgs(`[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]`), "messages.0.content.0.source.data"},
		{"image file source", msgs(`[{"type":"image","source":{"type":"file","file_id":"file_1"}}]`), "messages.0.content.0.source"},
		{"image URL not http", msgs(`[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]`), "messages.0.content.0.source.url"},
		{"document URL source", msgs(`[{"type":"text","text":"read"},{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]`), "messages.0.content.1.source"},
		{"document file source", msgs(`[{"type":"document","source":{"type":"file","file_id":"file_1"}}]`), "messages.0.content.0.source"},
		{"document text source", msgs(`[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"}}]`), "messages.0.content.0.source"},
		{"document content source", msgs(`[{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}}]`), "messages.0.content.0.source"},
		{"document source type missing", msgs(`[{"type":"document","source":{"media_type":"application/pdf","data":"JVBERi0="}}]`), "messages.0.content.0.source.type"},
		{"document plain-text media type", msgs(`[{"type":"document","source":{"type":"base64","media_type":"text/plain","data":"aGVsbG8="}}]`), "messages.0.content.0.source.media_type"},
		{"document image media type", msgs(`[{"type":"document","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]`), "messages.0.content.0.source.media_type"},
		{"document bad base64", msgs(`[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"%%%"}}]`), "messages.0.content.0.source.data"},
		{"document source missing", msgs(`[{"type":"document","title":"a.pdf"}]`), "messages.0.content.0.source"},
		{"document source a string", msgs(`[{"type":"document","source":"JVBERi0="}]`), "messages.0.content.0.source"},
		{"document title not a string", msgs(`[{"type":"document","title":1,` + pdf + `}]`), "messages.0.content.0.title"},
		{"tool_use from the user", msgs(`[{"type":"tool_use","id":"t","name":"f","input":{}}]`), "messages.0.content.0.type"},
		{"thinking from the user", msgs(`[{"type":"thinking","thinking":"x","signature":"s"}]`), "messages.0.content.0.type"},
		{"tool_result from the assistant", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]}]}`, "messages.1.content.0.type"},
		{"tool_use input not an object", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]}]}`, "messages.1.content.0.input"},
		{"tool_use id missing", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, "messages.1.content.0.id"},
		{"redacted_thinking data missing", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"redacted_thinking"}]}]}`, "messages.1.content.0.data"},
		{"thinking signature not a string", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":5}]}]}`, "messages.1.content.0.signature"},
		{"tool_result id missing", msgs(`[{"type":"tool_result","content":"x"}]`), "messages.0.content.0.tool_use_id"},
		{"tool_result content a number", msgs(`[{"type":"tool_result","tool_use_id":"t","content":3}]`), "messages.0.content.0.content"},
		{"tool_result nested tool_use", msgs(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]`), "messages.0.content.0.content.0.type"},
		{"tool_result nested PDF URL", msgs(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]`), "messages.0.content.0.content.0.source"},
		{"tool_result is_error a string", msgs(`[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]`), "messages.0.content.0.is_error"},
		{"block cache_control type", msgs(`[{"type":"text","text":"a","cache_control":{"type":"persistent"}}]`), "messages.0.content.0.cache_control.type"},
		{"block cache_control ttl", msgs(`[{"type":"text","text":"a","cache_control":{"type":"ephemeral","ttl":"10m"}}]`), "messages.0.content.0.cache_control.ttl"},
		{"block cache_control not an object", msgs(`[{"type":"text","text":"a","cache_control":"ephemeral"}]`), "messages.0.content.0.cache_control"},
		{"system a number", with(`"system":1`), "system"},
		{"system block not text", with(`"system":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]`), "system.0.type"},
		{"system block empty text", with(`"system":[{"type":"text","text":""}]`), "system.0.text"},
		{"system cache_control ttl", with(`"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral","ttl":"1d"}}]`), "system.0.cache_control.ttl"},
		{"tools an object", with(`"tools":{}`), "tools"},
		{"server tool", with(`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`), "tools.0.type"},
		{"bash tool", with(`"tools":[{"type":"bash_20250124","name":"bash"}]`), "tools.0.type"},
		{"tool name missing", with(`"tools":[{"input_schema":{"type":"object"}}]`), "tools.0.name"},
		{"tool input_schema missing", with(`"tools":[{"name":"f"}]`), "tools.0.input_schema"},
		{"tool input_schema a string", with(`"tools":[{"name":"f","input_schema":"{}"}]`), "tools.0.input_schema"},
		{"tool names repeated", with(`"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}]`), "tools.1.name"},
		{"tool strict a string", with(`"tools":[{"name":"f","input_schema":{},"strict":"true"}]`), "tools.0.strict"},
		{"tool cache_control ttl", with(`"tools":[{"name":"f","input_schema":{},"cache_control":{"type":"ephemeral","ttl":"2h"}}]`), "tools.0.cache_control.ttl"},
		{"tool_choice a string", with(`"tool_choice":"auto"`), "tool_choice"},
		{"tool_choice type unknown", with(`"tool_choice":{"type":"required"}`), "tool_choice.type"},
		{"tool_choice tool without name", with(`"tool_choice":{"type":"tool"}`), "tool_choice.name"},
		{"tool_choice disable_parallel a string", with(`"tool_choice":{"type":"auto","disable_parallel_tool_use":"true"}`), "tool_choice.disable_parallel_tool_use"},
		{"output_config a string", with(`"output_config":"json"`), "output_config"},
		{"output_config effort unknown", with(`"output_config":{"effort":"extreme"}`), "output_config.effort"},
		{"output_config format type", with(`"output_config":{"format":{"type":"json_object"}}`), "output_config.format.type"},
		{"output_config format schema missing", with(`"output_config":{"format":{"type":"json_schema"}}`), "output_config.format.schema"},
		{"output_config format schema a string", with(`"output_config":{"format":{"type":"json_schema","schema":"{}"}}`), "output_config.format.schema"},
		{"output_format schema missing", with(`"output_format":{"type":"json_schema"}`), "output_format.schema"},
		{"thinking a bool", with(`"thinking":true`), "thinking"},
		{"thinking type unknown", with(`"thinking":{"type":"on"}`), "thinking.type"},
		{"thinking budget missing", with(`"thinking":{"type":"enabled"}`), "thinking.budget_tokens"},
		{"thinking budget too small", with(`"thinking":{"type":"enabled","budget_tokens":100}`), "thinking.budget_tokens"},
		{"thinking budget not below max_tokens", with(`"thinking":{"type":"enabled","budget_tokens":2000}`), "thinking.budget_tokens"},
		{"thinking display unknown", with(`"thinking":{"type":"adaptive","display":"full"}`), "thinking.display"},
		{"temperature a string", with(`"temperature":"0.5"`), "temperature"},
		{"temperature above 1", with(`"temperature":1.5`), "temperature"},
		{"top_p above 1", with(`"top_p":2`), "top_p"},
		{"top_k negative", with(`"top_k":-1`), "top_k"},
		{"top_k fractional", with(`"top_k":2.5`), "top_k"},
		{"stop_sequences a string", with(`"stop_sequences":"END"`), "stop_sequences"},
		{"stop_sequences item a number", with(`"stop_sequences":["a",1]`), "stop_sequences.1"},
		{"metadata a string", with(`"metadata":"u"`), "metadata"},
		{"metadata user_id a number", with(`"metadata":{"user_id":1}`), "metadata.user_id"},
		{"stream a string", with(`"stream":"yes"`), "stream"},
		{"top-level cache_control type", with(`"cache_control":{"type":"auto"}`), "cache_control.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			_, err := Codec{}.DecodeRequest(httptest.NewRequest("POST", "/v1/messages", nil), []byte(tt.body))
			var e *llm.Error
			is.True(errors.As(err, &e))              // an *llm.Error
			is.Equal(e.Kind, llm.KindInvalidRequest) // invalid_request
			is.Equal(e.Param, tt.param)              // names the field
			is.True(e.Message != "")                 // has a message

			rec := httptest.NewRecorder()
			Codec{}.WriteError(rec, err)
			is.Equal(rec.Code, http.StatusBadRequest) // 400 in the native envelope
			var env errorEnvelope
			is.NoErr(json.Unmarshal(rec.Body.Bytes(), &env))
			is.Equal(env.Type, "error")
			is.Equal(env.Error.Type, "invalid_request_error")
			is.True(strings.HasPrefix(env.Error.Message, tt.param)) // message starts with the field path
		})
	}
}

func TestCountTokens(t *testing.T) {
	t.Run("no max_tokens needed", func(t *testing.T) {
		is := is.New(t)
		body := `{"model":"svc-fusion","system":"Be brief.","messages":[{"role":"user","content":"Hello there, how are you?"}],"stream":"ignored","tools":[{"name":"f","input_schema":{"type":"object"}}]}`
		rec := httptest.NewRecorder()
		Codec{}.CountTokens(rec, httptest.NewRequest("POST", "/v1/messages/count_tokens", nil), []byte(body))
		is.Equal(rec.Code, http.StatusOK)
		is.Equal(rec.Header().Get("Content-Type"), "application/json")
		req, err := decodeRequest([]byte(body), true)
		is.NoErr(err)
		var got struct {
			InputTokens int `json:"input_tokens"`
		}
		is.NoErr(json.Unmarshal(rec.Body.Bytes(), &got))
		is.Equal(got.InputTokens, req.InputTokens()) // the canonical estimate
		is.True(got.InputTokens > 0)
	})
	t.Run("a PDF counts its pages", func(t *testing.T) {
		is := is.New(t)
		body := `{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`
		rec := httptest.NewRecorder()
		Codec{}.CountTokens(rec, httptest.NewRequest("POST", "/v1/messages/count_tokens", nil), []byte(body))
		is.Equal(rec.Code, http.StatusOK)
		is.True(strings.Contains(rec.Body.String(), `"input_tokens":15`)) // one page ≈ 1500 tokens
	})
	t.Run("invalid request in the native envelope", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		Codec{}.CountTokens(rec, httptest.NewRequest("POST", "/v1/messages/count_tokens", nil),
			[]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`))
		is.Equal(rec.Code, http.StatusBadRequest)
		var env errorEnvelope
		is.NoErr(json.Unmarshal(rec.Body.Bytes(), &env))
		is.Equal(env.Error.Type, "invalid_request_error")
		is.True(strings.HasPrefix(env.Error.Message, "messages.0.content.0.source: "))
	})
}
