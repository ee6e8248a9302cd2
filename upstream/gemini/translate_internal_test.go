package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestTranslate_Effort(t *testing.T) {
	cases := []struct {
		r       *llm.Reasoning
		gBudget string
	}{
		{nil, ""},
		{&llm.Reasoning{Effort: "none"}, "0"},
		{&llm.Reasoning{BudgetTokens: 0}, "0"},
		{&llm.Reasoning{Effort: "HIGH", Enabled: true}, "24576"},
		{&llm.Reasoning{Effort: "max", Enabled: true}, "32768"},
		{&llm.Reasoning{BudgetTokens: 1500, Enabled: true}, "1500"},
		{&llm.Reasoning{BudgetTokens: 30000, Enabled: true}, "30000"},
		{&llm.Reasoning{Enabled: true, IncludeThoughts: true}, ""},
	}
	for _, c := range cases {
		is := is.New(t)
		b, err := (&Backend{}).body(&llm.Request{Reasoning: c.r})
		is.NoErr(err) // gemini body
		var g struct {
			GenerationConfig *struct {
				ThinkingConfig *struct{ ThinkingBudget *int }
			}
		}
		is.NoErr(json.Unmarshal(b, &g))
		got := ""
		if gc := g.GenerationConfig; gc != nil && gc.ThinkingConfig != nil && gc.ThinkingConfig.ThinkingBudget != nil {
			got = strings.TrimSpace(string(mustJSON(*gc.ThinkingConfig.ThinkingBudget)))
		}
		is.Equal(got, c.gBudget)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestTranslate_SystemGuidance(t *testing.T) {
	// generate-content: marked guidance inside the user turns.
	is := is.New(t)
	b, err := (&Backend{}).body(protocoltest.GuidedRequest())
	is.NoErr(err)
	var r struct {
		Contents []struct {
			Role  string
			Parts []struct {
				Text             string
				FunctionResponse json.RawMessage
			}
		}
	}
	is.NoErr(json.Unmarshal(b, &r))
	is.Equal(len(r.Contents), 3)
	is.Equal(r.Contents[0].Parts[1].Text, "<system-reminder>\nWorking directory: /tmp\n</system-reminder>")
	is.True(r.Contents[2].Parts[0].FunctionResponse != nil) // the response opens the turn
	is.Equal(r.Contents[2].Parts[2].Text, "<system-reminder>\nToday is Monday.\n</system-reminder>")
}

func TestStopRule(t *testing.T) {
	protocoltest.CheckStopRule(t, geminiStops, []protocoltest.StopRuleCase{
		{Name: "five go up", Stops: []string{"a", "b", "c", "d", "e"}, Sent: []string{"a", "b", "c", "d", "e"}},
		{Name: "a sixth is the gateway's", Stops: []string{"a", "b", "c", "d", "e", "f"}, Sent: []string{"a", "b", "c", "d", "e"}, Gateway: []string{"a", "b", "c", "d", "e", "f"}},
	})
}

// OpenAI takes a request of a developer message alone; generate-content
// needs contents, so the instructions are sent as the user turn.
func TestTranslate_InstructionsAlone(t *testing.T) {
	is := is.New(t)
	b, err := (&Backend{}).body(&llm.Request{Model: "m", System: []llm.Part{llm.TextPart("Say hi.")}})
	is.NoErr(err)
	var r struct {
		SystemInstruction json.RawMessage
		Contents          []struct {
			Role  string
			Parts []struct{ Text string }
		}
	}
	is.NoErr(json.Unmarshal(b, &r))
	is.Equal(len(r.SystemInstruction), 0)
	is.Equal(len(r.Contents), 1)
	is.Equal(r.Contents[0].Role, "user")
	is.Equal(r.Contents[0].Parts[0].Text, "Say hi.")
}

// Google's protos mark a function declaration's description required, and
// Google's own SDK (python-genai's from_callable, for a function without a
// docstring) sends "" for none: so does svcgw.
func TestTranslate_DeclarationWithoutDescription(t *testing.T) {
	is := is.New(t)
	b, err := (&Backend{}).body(&llm.Request{Model: "m",
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}},
		Tools:    []llm.Tool{{Name: "get_time", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	is.NoErr(err)
	var r struct {
		Tools []struct {
			FunctionDeclarations []map[string]json.RawMessage
		}
	}
	is.NoErr(json.Unmarshal(b, &r))
	is.Equal(string(r.Tools[0].FunctionDeclarations[0]["description"]), `""`)
}
