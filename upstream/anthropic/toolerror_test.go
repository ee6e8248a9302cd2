package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

// A failed tool call's result (Anthropic is_error, a Gemini {"error": …}
// response) must reach every protocol in a form the model sees.

func TestToolResultError_Messages(t *testing.T) {
	is := is.New(t)
	f := protocoltest.Replay(t, "text.json")
	_, err := anthropic.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), protocoltest.FailedCall("no such city"))
	is.NoErr(err)
	var body struct {
		Messages []struct {
			Content []struct {
				Type    string `json:"type"`
				IsError bool   `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
	}
	is.NoErr(json.Unmarshal(f.Last(t).Body, &body))
	bl := body.Messages[len(body.Messages)-1].Content[0]
	is.Equal(bl.Type, "tool_result")
	is.True(bl.IsError) // the protocol's own flag
}
