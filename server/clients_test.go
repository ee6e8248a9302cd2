package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/matryer/is"
)

// Requests shaped like those of the tools people point at a gateway (coding
// agents, app frameworks), replayed against the real handler and read the
// way each tool reads the reply. The bodies follow exchanges recorded from
// the clients named in each test.

// langchainUsage is how @langchain/anthropic reads a streamed call's usage:
// input and cache tokens from message_start only (its message_delta chunks
// carry output tokens alone), output tokens from message_delta.
type langchainUsage struct{ input, cacheRead, cacheWrite, output int64 }

func langchainStreamUsage(t *testing.T, stream interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}) langchainUsage {
	t.Helper()
	var u langchainUsage
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "message_start":
			mu := ev.Message.Usage
			u.input = mu.InputTokens + mu.CacheReadInputTokens + mu.CacheCreationInputTokens
			u.cacheRead, u.cacheWrite = mu.CacheReadInputTokens, mu.CacheCreationInputTokens
		case "message_delta":
			u.output = ev.Usage.OutputTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return u
}

// @langchain/anthropic (1.5) streams every call and reports input and cache
// tokens from message_start alone: zero there meant every streamed call
// reported input_tokens 0.
func TestClients_LangChainAnthropicStreamUsage(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)
	// A cacheable system prompt, as LangChain sends with cache_control on
	// a SystemMessage content block; the second call reads the cache.
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 2048,
		System: []anthropic.TextBlockParam{{
			Text:         strings.Repeat("You are a careful assistant who answers in one sentence. ", 200),
			CacheControl: anthropic.NewCacheControlEphemeralParam(),
		}},
		Messages: msgsUser("What is the capital of France?"),
	}
	first := langchainStreamUsage(t, client.Messages.NewStreaming(ctx, params))
	second := langchainStreamUsage(t, client.Messages.NewStreaming(ctx, params))
	want, err := client.Messages.New(ctx, params)
	is.NoErr(err)

	is.True(first.input > 1000)         // the real prompt size, not 0
	is.True(first.cacheWrite > 0)       // the first call writes the cache
	is.Equal(second.input, first.input) // the same prompt
	is.True(second.cacheRead > 0)       // and the second reads it, as message_start says
	// What LangChain adds up is what the call was billed for.
	is.Equal(second.input, want.Usage.InputTokens+want.Usage.CacheReadInputTokens+want.Usage.CacheCreationInputTokens)
	is.Equal(second.output, want.Usage.OutputTokens)
}

// claudeCodeBetas is the anthropic-beta header Claude Code (2.1.330) sends
// by default, as recorded.
const claudeCodeBetas = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24"

// claudeCodeBody is a Claude Code request body as recorded (system prompt,
// tools and reminders shortened): a system message inside messages, tools
// that change mid-conversation, adaptive thinking and per-turn effort.
func claudeCodeBody(messages string, thinking string) string {
	return `{"model":"claude-opus-5-5","max_tokens":32000,"stream":true,
		"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.330.d01; cc_entrypoint=sdk-cli;"},
			{"type":"text","text":"You are a Claude agent, built on Anthropic's Claude Agent SDK.","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"Bash","description":"Run a shell command.","input_schema":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]}},
			{"name":"DeferredToolPlaceholder","description":"Placeholder.","input_schema":{"type":"object","properties":{}},"defer_loading":true}],
		"messages":` + messages + `,
		"thinking":` + thinking + `,
		"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
		"output_config":{"effort":"medium"},
		"metadata":{"user_id":"{\"session_id\":\"c789baa0\"}"}}`
}

// Claude Code's defaults (per-turn-control-2026-07-01: a system message
// inside messages; thinking-display-updates-2026-08-18: thinking display
// "updates") were each a 400 that cost a retry before it fell back. A tool
// turn end to end, streamed as Claude Code streams, read with the SDK's
// accumulator.
func TestClients_ClaudeCodeDefaults(t *testing.T) {
	gw := newTestGateway(t)
	headers := []string{"anthropic-version", "2023-06-01", "anthropic-beta", claudeCodeBetas, "x-api-key", gw.Key, "Authorization", ""}
	post := func(t *testing.T, body string) anthropic.Message {
		t.Helper()
		resp, raw := gw.do(t, http.MethodPost, "/svc/v1/messages?beta=true", body, headers...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		var msg anthropic.Message
		for _, data := range oaiSSE(t, raw) {
			var ev anthropic.MessageStreamEventUnion
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			if err := msg.Accumulate(ev); err != nil {
				t.Fatalf("accumulate %s: %v", data, err)
			}
		}
		return msg
	}
	reminder := `{"role":"system","content":[{"type":"text","text":"# Environment\nPrimary working directory: /tmp/work"}]}`
	first := `[{"role":"user","content":[{"type":"text","text":"<system-reminder>\nAttribution.\n</system-reminder>\n"},{"type":"text","text":"List the files here."}]},` + reminder + `]`

	t.Run("per-turn system message: the tool call", func(t *testing.T) {
		is := is.New(t)
		msg := post(t, claudeCodeBody(first, `{"type":"adaptive","display":"omitted"}`))
		is.Equal(msg.StopReason, anthropic.StopReasonToolUse)
		call := msg.Content[len(msg.Content)-1]
		is.Equal(call.Type, "tool_use")
		is.Equal(call.Name, "Bash")

		// The tool result, with guidance after it and an effort change, as
		// the next turn sends them: the fixture answers from the result.
		next := `[` + strings.TrimSuffix(strings.TrimPrefix(first, "["), "]") + `,
			{"role":"assistant","content":[{"type":"tool_use","id":"` + call.ID + `","name":"Bash","input":` + string(call.Input) + `}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + call.ID + `","content":"a.txt\nb.txt"}]},
			{"role":"system","content":"Plan mode is off.","clear_at":"next_user_message"},
			{"role":"system","content":[],"output_config":{"effort":"high"}}]`
		msg = post(t, claudeCodeBody(next, `{"type":"adaptive","display":"omitted"}`))
		is.Equal(msg.StopReason, anthropic.StopReasonEndTurn)
		text := msgsText(&msg)
		is.True(strings.Contains(text, "a.txt")) // the reply reads the tool result
	})

	t.Run("thinking display updates: thinking shown, as summarized", func(t *testing.T) {
		is := is.New(t)
		msg := post(t, claudeCodeBody(first, `{"type":"enabled","budget_tokens":1024,"display":"updates"}`))
		is.Equal(msg.Content[0].Type, "thinking")
		is.True(msg.Content[0].Thinking != "") // the thinking text is streamed
		is.True(msg.Content[0].Signature != "")
	})
}
