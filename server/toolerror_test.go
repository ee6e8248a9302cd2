package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/upstream"
)

func TestMessagesSDK_ToolErrorReachesChatCompletions(t *testing.T) {
	// is_error has no field in chat-completions: the tool message says it.
	is := is.New(t)
	fake := newMXFake(t, mxOpenAI)
	env := newMXEnv(t, upstream.RouterOptions{}, fake.candidate("openai"))
	client := msgsClient(env.gw)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "svc-fusion", MaxTokens: 256, Tools: []anthropic.ToolUnionParam{msgsWeatherTool},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Atlantis?")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Atlantis"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "no such city", true)),
		},
	})
	is.NoErr(err)
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	is.NoErr(json.Unmarshal(fake.last(t).Raw, &body))
	last := body.Messages[len(body.Messages)-1]
	is.Equal(last.Role, "tool")
	is.Equal(last.Content, "[tool call failed]\nno such city")
}
