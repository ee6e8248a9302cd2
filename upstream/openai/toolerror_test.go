package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
	"github.com/svcgw/svcgw/upstream/openai"
)

// A failed tool call's result (Anthropic is_error, a Gemini {"error": …}
// response) must reach every protocol in a form the model sees.

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
			f := protocoltest.Replay(t, "text.json")
			req := protocoltest.FailedCall(tt.result)
			req.Messages[2].Parts[0].ToolResult.IsError = tt.isError
			_, err := openai.New(protocoltest.Options(f, "/v1")).Complete(protocoltest.Context(t), req)
			is.NoErr(err)
			var body struct {
				Messages []struct {
					Role       string `json:"role"`
					Content    string `json:"content"`
					ToolCallID string `json:"tool_call_id"`
				} `json:"messages"`
			}
			is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
			tool := body.Messages[len(body.Messages)-1]
			is.Equal(tool.Role, "tool")
			is.Equal(tool.ToolCallID, "call_1")
			is.Equal(tool.Content, tt.want)
		})
	}
}
