package gencontent

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/golden"
	"github.com/svcgw/svcgw/llm"
)

// newRequest is an inbound request as the server routes it: the part of the
// path after /v1beta/models/ is the {rest} wildcard.
func newRequest(rest string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/svc/v1beta/models/"+rest, nil)
	r.SetPathValue("rest", rest)
	return r
}

// decodeCases lists testdata/decode/<case>.json (the request bodies).
func decodeCases(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "decode", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".want.json") {
			names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
		}
	}
	if len(names) == 0 {
		t.Fatal("no decode cases in testdata/decode")
	}
	return names
}

// TestCodec_DecodeRequest decodes each testdata/decode/<case>.json and
// compares the canonical request with <case>.want.json.
func TestCodec_DecodeRequest(t *testing.T) {
	for _, name := range decodeCases(t) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "decode", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			req, err := Codec{}.DecodeRequest(newRequest("gemini-2.5-flash:generateContent"), body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			goldenJSON(t, filepath.Join("decode", name+".want.json"), canonicalJSON(t, req))
		})
	}
}

// maxOutputTokens 0 means the default, as in the official SDKs (an int32
// with omitempty): the one surface where 0 is unset.
func TestCodec_DecodeRequest_maxOutputTokensZeroIsUnset(t *testing.T) {
	is := is.New(t)
	req, err := Codec{}.DecodeRequest(newRequest("gemini-2.5-flash:generateContent"),
		[]byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":0}}`))
	is.NoErr(err)
	is.Equal(req.MaxTokens, 0)
}

func TestCodec_DecodeRequest_path(t *testing.T) {
	body := []byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`)
	t.Run("generateContent is not streamed", func(t *testing.T) {
		is := is.New(t)
		req, err := Codec{}.DecodeRequest(newRequest("gemini-2.5-pro:generateContent"), body)
		is.NoErr(err)
		is.Equal(req.Model, "gemini-2.5-pro") // model from the path
		is.True(!req.Stream)
	})
	t.Run("streamGenerateContent streams with usage", func(t *testing.T) {
		is := is.New(t)
		req, err := Codec{}.DecodeRequest(newRequest("models/svc-max:streamGenerateContent"), body)
		is.NoErr(err)
		is.Equal(req.Model, "svc-max") // models/ prefix dropped
		is.True(req.Stream)
		is.True(req.IncludeUsage)
	})
	t.Run("unknown method is not found", func(t *testing.T) {
		is := is.New(t)
		_, err := Codec{}.DecodeRequest(newRequest("x:embedText"), body)
		is.Equal(llm.AsError(err).Kind, llm.KindNotFound)
	})
}

func TestParseModelMethod(t *testing.T) {
	tests := []struct {
		rest, model, method string
		kind                llm.Kind // "" when it parses
	}{
		{"gemini-2.5-flash:generateContent", "gemini-2.5-flash", MethodGenerate, ""},
		{"gemini-2.5-flash:streamGenerateContent", "gemini-2.5-flash", MethodStreamGenerate, ""},
		{"my-model:countTokens", "my-model", MethodCountTokens, ""},
		{"models/gemini-2.5-pro:generateContent", "gemini-2.5-pro", MethodGenerate, ""},
		{"ns:model:v2:generateContent", "ns:model:v2", MethodGenerate, ""}, // split on the last colon
		{"org/custom-id:generateContent", "org/custom-id", MethodGenerate, ""},
		{"gemini-2.5-flash", "", "", llm.KindNotFound},
		{"text-embedding-004:embedContent", "text-embedding-004", MethodEmbed, ""},
		{"gemini-embedding-001:batchEmbedContents", "gemini-embedding-001", MethodBatchEmbed, ""},
		{"gemini-2.5-flash:embedText", "", "", llm.KindNotFound},
		{"gemini-2.5-flash:GenerateContent", "", "", llm.KindNotFound},
		{":generateContent", "", "", llm.KindInvalidRequest},
		{"models/:generateContent", "", "", llm.KindInvalidRequest},
		{"", "", "", llm.KindNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.rest, func(t *testing.T) {
			is := is.New(t)
			model, method, err := ParseModelMethod(tt.rest)
			if tt.kind != "" {
				var e *llm.Error
				is.True(errors.As(err, &e)) // an *llm.Error
				is.Equal(e.Kind, tt.kind)
				return
			}
			is.NoErr(err)
			is.Equal(model, tt.model)
			is.Equal(method, tt.method)
		})
	}
}

// TestCodec_DecodeRequest_invalid lists every 400 the decoder gives, with
// the field it names.
func TestCodec_DecodeRequest_invalid(t *testing.T) {
	const user = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]`
	tests := []struct {
		name, body, param string
	}{
		{"empty body", ``, ""},
		{"broken JSON", `{"contents":`, ""},
		{"body is not an object", `[]`, ""},
		{"contents is not an array", `{"contents":5}`, "contents"},
		{"text is not a string", `{"contents":[{"parts":[{"text":5}]}]}`, "contents.parts.text"},
		{"temperature is not a number", user + `,"generationConfig":{"temperature":"hot"}}`, "generationConfig.temperature"},
		{"candidateCount is not an integer", user + `,"generationConfig":{"candidateCount":1.5}}`, "generationConfig.candidateCount"},
		{"tool is not an object", user + `,"tools":[5]}`, "tools[0]"},
		{"functionDeclarations is not an array", user + `,"tools":[{"functionDeclarations":{}}]}`, "tools[0].functionDeclarations"},
		{"no contents", `{"contents":[]}`, "contents"},
		{"contents missing", `{"systemInstruction":{"parts":[{"text":"x"}]}}`, "contents"},
		{"only empty parts", `{"contents":[{"parts":[{"text":""}]},{"role":"model","parts":[]}]}`, "contents"},
		{"system role", `{"contents":[{"role":"system","parts":[{"text":"x"}]}]}`, "contents[0].role"},
		{"assistant role", `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "contents[0].role"},
		{"bad base64", `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"@@@"}}]}]}`, "contents[0].parts[0].inlineData.data"},
		{"url-safe base64", `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"_-_-"}}]}]}`, "contents[0].parts[0].inlineData.data"},
		{"empty inline data", `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":""}}]}]}`, "contents[0].parts[0].inlineData.data"},
		{"audio", `{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","data":"AAAA"}}]}]}`, "contents[0].parts[0].inlineData.mimeType"},
		{"plain text file", `{"contents":[{"parts":[{"inlineData":{"mimeType":"text/plain","data":"AAAA"}}]}]}`, "contents[0].parts[0].inlineData.mimeType"},
		{"no mime type", `{"contents":[{"parts":[{"inlineData":{"data":"AAAA"}}]}]}`, "contents[0].parts[0].inlineData.mimeType"},
		{"fileData", `{"contents":[{"parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"https://example.com/a.pdf"}}]}]}`, "contents[0].parts[0].fileData"},
		{"executableCode", `{"contents":[{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":"1"}}]}]}`, "contents[0].parts[0]"},
		{"two data fields", `{"contents":[{"parts":[{"text":"x","inlineData":{"mimeType":"image/png","data":"AAAA"}}]}]}`, "contents[0].parts[0]"},
		{"functionCall in a user turn", `{"contents":[{"role":"user","parts":[{"functionCall":{"name":"f","args":{}}}]}]}`, "contents[0].parts[0].functionCall"},
		{"functionResponse in a model turn", `{"contents":[{"role":"model","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`, "contents[0].parts[0].functionResponse"},
		{"thought in a user turn", `{"contents":[{"parts":[{"text":"x","thought":true}]}]}`, "contents[0].parts[0].thought"},
		{"functionCall without a name", `{"contents":[{"role":"model","parts":[{"functionCall":{"args":{}}}]}]}`, "contents[0].parts[0].functionCall.name"},
		{"args is a string", `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":"{}"}}]}]}`, "contents[0].parts[0].functionCall.args"},
		{"functionResponse without a name", `{"contents":[{"parts":[{"functionResponse":{"response":{}}}]}]}`, "contents[0].parts[0].functionResponse.name"},
		{"response is a string", `{"contents":[{"parts":[{"functionResponse":{"name":"f","response":"ok"}}]}]}`, "contents[0].parts[0].functionResponse.response"},
		{"functionResponse fileData", `{"contents":[{"parts":[{"functionResponse":{"name":"f","response":{},"parts":[{"fileData":{"fileUri":"x"}}]}}]}]}`, "contents[0].parts[0].functionResponse.parts[0].fileData"},
		{"image in systemInstruction", `{"systemInstruction":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},"contents":[{"parts":[{"text":"x"}]}]}`, "systemInstruction.parts[0]"},
		{"googleSearch tool", user + `,"tools":[{"googleSearch":{}}]}`, "tools[0].googleSearch"},
		{"codeExecution tool", user + `,"tools":[{"functionDeclarations":[{"name":"f"}]},{"codeExecution":{}}]}`, "tools[1].codeExecution"},
		{"function without a name", user + `,"tools":[{"functionDeclarations":[{"description":"x"}]}]}`, "tools[0].functionDeclarations[0].name"},
		{"function declared twice", user + `,"tools":[{"functionDeclarations":[{"name":"f"},{"name":"f"}]}]}`, "tools[0].functionDeclarations[1].name"},
		{"both parameter schemas", user + `,"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"},"parametersJsonSchema":{"type":"object"}}]}]}`, "tools[0].functionDeclarations[0]"},
		{"parameters not an object", user + `,"tools":[{"functionDeclarations":[{"name":"f","parameters":[1]}]}]}`, "tools[0].functionDeclarations[0].parameters"},
		{"parametersJsonSchema not an object", user + `,"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":true}]}]}`, "tools[0].functionDeclarations[0].parametersJsonSchema"},
		{"schema type not a string", user + `,"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":1}}]}]}`, "tools[0].functionDeclarations[0].parameters.type"},
		{"schema properties not an object", user + `,"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":[]}}]}]}`, "tools[0].functionDeclarations[0].parameters.properties"},
		{"schema bound not an integer", user + `,"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"ARRAY","maxItems":"many"}}}`, "generationConfig.responseSchema.maxItems"},
		{"unknown mode", user + `,"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`, "toolConfig.functionCallingConfig.mode"},
		{"undeclared allowed function", user + `,"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["g"]}}}`, "toolConfig.functionCallingConfig.allowedFunctionNames[0]"},
		{"two candidates", user + `,"generationConfig":{"candidateCount":2}}`, "generationConfig.candidateCount"},
		{"negative candidates", user + `,"generationConfig":{"candidateCount":-1}}`, "generationConfig.candidateCount"},
		{"negative maxOutputTokens", user + `,"generationConfig":{"maxOutputTokens":-5}}`, "generationConfig.maxOutputTokens"},
		{"fractional topK", user + `,"generationConfig":{"topK":1.5}}`, "generationConfig.topK"},
		{"temperature too high", user + `,"generationConfig":{"temperature":3}}`, "generationConfig.temperature"},
		{"topP too high", user + `,"generationConfig":{"topP":1.5}}`, "generationConfig.topP"},
		{"negative logprobs", user + `,"generationConfig":{"logprobs":-1}}`, "generationConfig.logprobs"},
		{"enum output", user + `,"generationConfig":{"responseMimeType":"text/x.enum","responseSchema":{"type":"STRING","enum":["a"]}}}`, "generationConfig.responseMimeType"},
		{"both response schemas", user + `,"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"},"responseJsonSchema":{"type":"object"}}}`, "generationConfig.responseSchema"},
		{"responseJsonSchema not an object", user + `,"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":"object"}}`, "generationConfig.responseJsonSchema"},
		{"schema with text/plain", user + `,"generationConfig":{"responseMimeType":"text/plain","responseJsonSchema":{"type":"object"}}}`, "generationConfig.responseMimeType"},
		{"image output", user + `,"generationConfig":{"responseModalities":["TEXT","IMAGE"]}}`, "generationConfig.responseModalities[1]"},
		{"unknown thinking level", user + `,"generationConfig":{"thinkingConfig":{"thinkingLevel":"EXTREME"}}}`, "generationConfig.thinkingConfig.thinkingLevel"},
		{"thinking budget below -1", user + `,"generationConfig":{"thinkingConfig":{"thinkingBudget":-2}}}`, "generationConfig.thinkingConfig.thinkingBudget"},
		{"cachedContent", user + `,"cachedContent":"cachedContents/abc"}`, "cachedContent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			_, err := Codec{}.DecodeRequest(newRequest("gemini-2.5-flash:generateContent"), []byte(tt.body))
			var e *llm.Error
			is.True(errors.As(err, &e)) // an *llm.Error
			is.Equal(e.Kind, llm.KindInvalidRequest)
			is.Equal(e.Param, tt.param)
			is.True(e.Message != "")
			if tt.param != "" && !strings.HasPrefix(tt.param, "contents") {
				is.True(strings.Contains(e.Message, tt.param)) // the message names the field
			}
		})
	}
}

// TestCountTokens counts the {contents} and {generateContentRequest} bodies
// alike, with llm.Request.InputTokens, and answers errors natively.
func TestCountTokens(t *testing.T) {
	contents := `{"contents":[{"role":"user","parts":[{"text":"How many tokens is this sentence?"}]}]}`
	want := (&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser,
		Parts: []llm.Part{llm.TextPart("How many tokens is this sentence?")}}}}).InputTokens()
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"contents", contents, 200, `{"totalTokens":` + strconv.Itoa(want) + `}`},
		{"generateContentRequest", `{"generateContentRequest":{"model":"models/x",` + contents[1:] + `}`, 200, `{"totalTokens":` + strconv.Itoa(want) + `}`},
		{"system and tools count too", `{"systemInstruction":{"parts":[{"text":"Be brief."}]},"tools":[{"functionDeclarations":[{"name":"f"}]}],` + contents[1:], 200, ""},
		{"empty contents", `{"contents":[]}`, 400, ""},
		{"bad field inside generateContentRequest", `{"generateContentRequest":{"contents":[{"parts":[{"text":1}]}]}}`, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			rec := httptest.NewRecorder()
			Codec{}.CountTokens(rec, newRequest("gemini-2.5-flash:countTokens"), []byte(tt.body))
			is.Equal(rec.Code, tt.status)
			is.True(strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json"))
			if tt.want != "" {
				if d := cmp.Diff(golden.Decode(t, []byte(tt.want)), golden.Decode(t, rec.Body.Bytes())); d != "" {
					t.Errorf("count (-want +got):\n%s", d)
				}
			}
			if tt.status == 200 && tt.want == "" {
				var got struct{ TotalTokens int }
				is.NoErr(json.Unmarshal(rec.Body.Bytes(), &got))
				is.True(got.TotalTokens > want) // the system prompt and tools add to it
			}
			if tt.status == 400 {
				var got errorEnvelope
				is.NoErr(json.Unmarshal(rec.Body.Bytes(), &got))
				is.Equal(got.Error.Status, "INVALID_ARGUMENT")
			}
		})
	}
	t.Run("field path names the wrapper", func(t *testing.T) {
		is := is.New(t)
		rec := httptest.NewRecorder()
		Codec{}.CountTokens(rec, newRequest("x:countTokens"), []byte(`{"generateContentRequest":{"contents":[{"parts":[{"text":1}]}]}}`))
		is.True(strings.Contains(rec.Body.String(), "generateContentRequest.contents.parts.text"))
	})
}

func TestPairToolResults(t *testing.T) {
	is := is.New(t)
	body := `{"contents":[
		{"parts":[{"text":"roll twice"}]},
		{"role":"model","parts":[{"functionCall":{"name":"roll"}},{"functionCall":{"name":"roll"}}]},
		{"parts":[
			{"functionResponse":{"name":"roll","response":{"v":1}}},
			{"functionResponse":{"name":"roll","response":{"v":2}}},
			{"functionResponse":{"name":"flip","response":{"v":"heads"}}}
		]}]}`
	req, err := decodeRequest([]byte(body), "")
	is.NoErr(err)
	calls, results := req.Messages[1].Parts, req.Messages[2].Parts
	is.Equal(calls[0].ToolCall.ID, "call_1_0")
	is.Equal(calls[1].ToolCall.ID, "call_1_1")
	is.Equal(results[0].ToolResult.CallID, "call_1_0") // same name: in order
	is.Equal(results[1].ToolResult.CallID, "call_1_1")
	is.Equal(results[2].ToolResult.CallID, "call_2_2") // answers no call: an id of its own
}
