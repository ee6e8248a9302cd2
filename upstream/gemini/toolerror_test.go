package gemini_test

import (
	"encoding/json"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// A failed tool call's result (Anthropic is_error, a Gemini {"error": …}
// response) must reach every protocol in a form the model sees.

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
			f := protocoltest.Replay(t, "complete.json")
			_, err := gemini.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), protocoltest.FailedCall(tt.result))
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
			is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
			fr := body.Contents[len(body.Contents)-1].Parts[0].FunctionResponse
			is.True(fr != nil)
			is.Equal(string(fr.Response), tt.want)
		})
	}
}
