package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestTranslate_AnthropicID(t *testing.T) {
	is := is.New(t)
	is.Equal(anthropicID("call.1:a/b"), "call_1_a_b")
}

func TestTranslate_AnthropicThinkingBudget(t *testing.T) {
	is := is.New(t)
	th, _ := anthropicThinking(&llm.Reasoning{BudgetTokens: 8000, Enabled: true}, 4096, false, nil)
	is.Equal(th.BudgetTokens, 4095) // below max_tokens
	th, _ = anthropicThinking(&llm.Reasoning{BudgetTokens: 8000, Enabled: true}, 1000, false, nil)
	is.True(th == nil) // no room for the API's minimum budget
	th, effort := anthropicThinking(&llm.Reasoning{Effort: "minimal", Enabled: true}, 1000, false, nil)
	is.Equal(th.Type, "adaptive")
	is.Equal(effort, "low")
	th, _ = anthropicThinking(&llm.Reasoning{Effort: "high", Enabled: true}, 1000, true, nil)
	is.True(th == nil) // a forced tool choice
}

func TestTranslate_SystemGuidance(t *testing.T) {
	// messages: marked guidance inside the user turns.
	is := is.New(t)
	b, err := (&Backend{}).body(protocoltest.GuidedRequest(), false)
	is.NoErr(err)
	var r struct {
		Messages []struct {
			Role    string
			Content []struct{ Type, Text string }
		}
	}
	is.NoErr(json.Unmarshal(b, &r))
	is.Equal(len(r.Messages), 3) // user, assistant, user: the turns alternate
	is.Equal(r.Messages[0].Content[1].Text, "<system-reminder>\nWorking directory: /tmp\n</system-reminder>")
	last := r.Messages[2].Content
	is.Equal(last[0].Type, "tool_result") // results open the turn
	is.Equal(last[1].Text, "<system-reminder>\nPlan mode is off.\n</system-reminder>")
	is.Equal(last[2].Text, "<system-reminder>\nToday is Monday.\n</system-reminder>")
}

func TestStopRule(t *testing.T) {
	protocoltest.CheckStopRule(t, anthropicStops, []protocoltest.StopRuleCase{
		{Name: "any number", Stops: []string{"a", "b", "c", "d", "e", "f", "g"}, Sent: []string{"a", "b", "c", "d", "e", "f", "g"}},
		{Name: "white space only and empty are the gateway's", Stops: []string{"\n", "END", "", " \t"}, Sent: []string{"END"}, Gateway: []string{"\n", "END", " \t"}},
		{Name: "white space around text goes up", Stops: []string{"\nHuman:"}, Sent: []string{"\nHuman:"}},
	})
}

// OpenAI takes a request of a developer message alone; the messages API
// needs a user turn, so the instructions are sent as it.
func TestTranslate_InstructionsAlone(t *testing.T) {
	is := is.New(t)
	b, err := (&Backend{}).body(&llm.Request{Model: "m", System: []llm.Part{llm.TextPart("Say hi.")}}, false)
	is.NoErr(err)
	var r struct {
		System   json.RawMessage
		Messages []struct {
			Role    string
			Content []struct{ Type, Text string }
		}
	}
	is.NoErr(json.Unmarshal(b, &r))
	is.Equal(len(r.System), 0) // no system prompt left
	is.Equal(len(r.Messages), 1)
	is.Equal(r.Messages[0].Role, "user")
	is.Equal(r.Messages[0].Content[0].Text, "Say hi.")
}
