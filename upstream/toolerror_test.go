package upstream_test

import (
	"encoding/json"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// A failed tool call's result (Anthropic is_error, a Gemini {"error": …}
// response) must reach every protocol in a form the model sees.

// failedCall is a tool loop whose one call failed with text.
func failedCall(text string) *llm.Request {
	r := toolLoop([]llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "get_weather",
		Arguments: json.RawMessage(`{"city":"Atlantis"}`)}}}, cityWeather)
	res := r.Messages[2].Parts[0].ToolResult
	res.Content, res.IsError = []llm.Part{llm.TextPart(text)}, true
	return r
}

func TestToolResultError_ChatCompletions(t *testing.T) {
	tests := []struct {
		name, result, want string
		isError            bool
	}{
		{"text after a marker line", "no such city", "[tool call failed]\nno such city", true},
		{"a JSON result too", `{"code":404}`, "[tool call failed]\n{\"code\":404}", true},
		{"no text: the marker alone", "", "[tool call failed]", true},
		{"a result that did not fail is as it was", "18°C", "18°C", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			f := replay(t, "openai/text.json")
			req := failedCall(tt.result)
			req.Messages[2].Parts[0].ToolResult.IsError = tt.isError
			_, err := upstream.NewOpenAI(options(f, "/v1")).Complete(testCtx(t), req)
			is.NoErr(err)
			var body struct {
				Messages []struct {
					Role       string `json:"role"`
					Content    string `json:"content"`
					ToolCallID string `json:"tool_call_id"`
				} `json:"messages"`
			}
			is.NoErr(json.Unmarshal(f.last(t).Body, &body))
			tool := body.Messages[len(body.Messages)-1]
			is.Equal(tool.Role, "tool")
			is.Equal(tool.ToolCallID, "call_1")
			is.Equal(tool.Content, tt.want)
		})
	}
}

func TestToolResultError_GenerateContent(t *testing.T) {
	tests := []struct {
		name, result, want string
	}{
		{"text becomes the error", "no such city", `{"error":"no such city"}`},
		{"a JSON object goes inside the error", `{"code": 404}`, `{"error":{"code":404}}`},
		{"an error object stays as it is", `{"error":{"code":404}}`, `{"error":{"code":404}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			f := replay(t, "gemini/complete.json")
			_, err := upstream.NewGemini(options(f, "")).Complete(testCtx(t), failedCall(tt.result))
			is.NoErr(err)
			var body struct {
				Contents []struct {
					Parts []struct {
						FunctionResponse *struct {
							Response json.RawMessage `json:"response"`
						} `json:"functionResponse"`
					} `json:"parts"`
				} `json:"contents"`
			}
			is.NoErr(json.Unmarshal(f.last(t).Body, &body))
			fr := body.Contents[len(body.Contents)-1].Parts[0].FunctionResponse
			is.True(fr != nil)
			is.Equal(string(fr.Response), tt.want)
		})
	}
}

func TestToolResultError_Messages(t *testing.T) {
	is := is.New(t)
	f := replay(t, "anthropic/text.json")
	_, err := upstream.NewAnthropic(options(f, "")).Complete(testCtx(t), failedCall("no such city"))
	is.NoErr(err)
	var body struct {
		Messages []struct {
			Content []struct {
				Type    string `json:"type"`
				IsError bool   `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
	}
	is.NoErr(json.Unmarshal(f.last(t).Body, &body))
	bl := body.Messages[len(body.Messages)-1].Content[0]
	is.Equal(bl.Type, "tool_result")
	is.True(bl.IsError) // the protocol's own flag
}
