package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
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

// recordingBackend records the last request each call sent upstream.
type recordingBackend struct {
	upstream.Backend
	mu   sync.Mutex
	last *llm.Request
}

func (b *recordingBackend) record(req *llm.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := *req
	b.last = &c
}

func (b *recordingBackend) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	b.record(req)
	return b.Backend.Complete(ctx, req)
}

func (b *recordingBackend) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	b.record(req)
	return b.Backend.Stream(ctx, req)
}

func (b *recordingBackend) lastRequest() *llm.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// aiSDKUserAgent is the User-Agent of the AI SDK's OpenAI provider, as
// recorded (ai 7.0.173, @ai-sdk/openai 4.0.118).
const aiSDKUserAgent = "ai-sdk-openai/4.0.118 ai-sdk-provider-utils/5.0.81 node.js/22"

// responsesItems reads a Responses body's output as the AI SDK does: type,
// id, the text of a message, a reasoning item's summary.
type responsesItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent string `json:"encrypted_content"`
	CallID           string `json:"call_id"`
	Name             string `json:"name"`
	Namespace        string `json:"namespace"`
	Arguments        string `json:"arguments"`
	Input            string `json:"input"`
}

func newRecordingGateway(t *testing.T) (*testGateway, *recordingBackend) {
	fx := fixture.New(fixture.Options{})
	rec := &recordingBackend{Backend: fx}
	return newTestGateway(t, oaiWithBackend(rec, fx.Limits())), rec
}

// The AI SDK's default OpenAI provider (store unset, i.e. true) replays
// earlier output items by id on the next turn: generateText's second
// message, as recorded.
func TestClients_AISDKItemReferences(t *testing.T) {
	gw, rec := newRecordingGateway(t)
	headers := []string{"User-Agent", aiSDKUserAgent}
	generate := func(t *testing.T, body string) (int, []responsesItem, []byte) {
		t.Helper()
		resp, raw := gw.do(t, http.MethodPost, "/svc/v1/responses", body, headers...)
		var out struct{ Output []responsesItem }
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out.Output, raw
	}

	t.Run("second turn by reference", func(t *testing.T) {
		is := is.New(t)
		status, out, raw := generate(t, `{"model":"gpt-4.1","input":[{"role":"user","content":[{"type":"input_text","text":"My name is Ada."}]}]}`)
		is.Equal(status, http.StatusOK)
		is.Equal(out[0].Type, "message")
		is.True(strings.HasPrefix(out[0].ID, "msg_"))
		first := out[0].Content[0].Text
		is.True(!strings.Contains(string(raw), "fixture"))

		status, _, raw = generate(t, `{"model":"gpt-4.1","input":[{"role":"user","content":[{"type":"input_text","text":"My name is Ada."}]},{"type":"item_reference","id":"`+out[0].ID+`"},{"role":"user","content":[{"type":"input_text","text":"What is my name?"}]}]}`)
		is.Equal(status, http.StatusOK) // was: 400 input[1].type "item_reference" is not supported
		// The backend saw the earlier answer, rebuilt from its id.
		msgs := rec.lastRequest().Messages
		is.Equal(len(msgs), 3)
		is.Equal(msgs[1].Role, llm.RoleAssistant)
		is.Equal(msgs[1].Parts[0].Text, first)
		is.True(!strings.Contains(string(raw), "fixture"))
	})

	t.Run("a tool loop with reasoning by reference", func(t *testing.T) {
		is := is.New(t)
		tools := `"tools":[{"type":"function","name":"weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}]`
		body := `{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}],"reasoning":{"effort":"medium","summary":"auto"},` + tools + `}`
		status, out, _ := generate(t, body)
		is.Equal(status, http.StatusOK)
		is.Equal(len(out), 2)
		is.Equal(out[0].Type, "reasoning")
		is.Equal(out[1].Type, "function_call")
		// Step 2 as the AI SDK sends it: the reasoning by reference, the
		// call in full, then its output.
		step2 := `{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]},
			{"type":"item_reference","id":"` + out[0].ID + `"},
			{"type":"function_call","call_id":"` + out[1].CallID + `","name":"weather","arguments":` + strconv.Quote(out[1].Arguments) + `},
			{"type":"function_call_output","call_id":"` + out[1].CallID + `","output":"sunny"}],"reasoning":{"effort":"medium","summary":"auto"},` + tools + `}`
		status, out2, raw := generate(t, step2)
		is.Equal(status, http.StatusOK)
		is.Equal(out2[len(out2)-1].Type, "message")
		is.True(strings.Contains(out2[len(out2)-1].Content[0].Text, "sunny"))
		// The reasoning went back upstream with its signature, opened.
		msgs := rec.lastRequest().Messages
		is.Equal(msgs[1].Parts[0].Type, llm.PartReasoning)
		is.Equal(msgs[1].Parts[0].Text, out[0].Summary[0].Text)
		is.True(msgs[1].Parts[0].Signature != "")
		is.True(!strings.Contains(string(raw), msgs[1].Parts[0].Signature)) // callers never see it unsealed
		is.Equal(gw.openSignature(t, out[0].EncryptedContent), msgs[1].Parts[0].Signature)
	})

	t.Run("references svcgw cannot resolve", func(t *testing.T) {
		is := is.New(t)
		_, out, _ := generate(t, `{"model":"gpt-4.1","input":"hi"}`)
		tampered := []byte(out[0].ID)
		tampered[len(tampered)-3] ^= 1
		for _, id := range []string{"msg_68b1f2c3d4e5f6a7b8c9d0e1", string(tampered), "msg_resp000_0"} {
			status, _, raw := generate(t, `{"model":"gpt-4.1","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"`+id+`"}]}`)
			is.Equal(status, http.StatusBadRequest) // a clear 400
			typ, param, _ := oaiEnvelope(t, raw)
			is.Equal(typ, "invalid_request_error")
			is.Equal(*param, "input[1].id") // naming the item
			is.True(strings.Contains(string(raw), "cannot be resolved"))
		}
		// An unresolvable reasoning reference is dropped, not refused.
		status, _, _ := generate(t, `{"model":"gpt-4.1","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"rs_68b1f2c3d4e5f6a7b8c9d0e1"},{"role":"user","content":"again"}]}`)
		is.Equal(status, http.StatusOK)
		msgs := rec.lastRequest().Messages
		is.Equal(len(msgs), 2) // the two user turns, nothing between
		is.Equal(msgs[1].Role, llm.RoleUser)
	})
}

// codexTools are the tools codex exec (0.169, wire_api "responses") offers
// by default, as recorded (descriptions and schemas shortened), plus its
// multi-agent namespace.
const codexTools = `[
	{"type":"function","name":"exec_command","description":"Runs a command in a PTY.","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"},"yield_time_ms":{"type":"number"},"max_output_tokens":{"type":"number"}},"required":["cmd"],"additionalProperties":false}},
	{"type":"custom","name":"apply_patch","description":"Edit files. This is a FREEFORM tool.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},
	{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
		{"type":"function","name":"spawn_agent","description":"Start a sub-agent.","strict":false,"parameters":{"type":"object","properties":{"task":{"type":"string"}},"required":["task"],"additionalProperties":false}}]},
	{"type":"tool_search","execution":"client","description":"Find deferred tools.","parameters":{"type":"object","properties":{"query":{"type":"string"}}}},
	{"type":"web_search","external_web_access":false,"search_content_types":["text","image"]}]`

// codexBody is a codex exec request as recorded: store false, encrypted
// reasoning asked for, a prompt cache key, and the input items so far.
func codexBody(input string) string {
	return `{"model":"gpt-5.5","stream":true,"input":` + input + `,"tools":` + codexTools + `,"tool_choice":"auto","parallel_tool_calls":true,
		"reasoning":{"effort":"medium"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"01a20a54",
		"text":{"verbosity":"low"},"client_metadata":{"session_id":"01a20a54"}}`
}

// codexTurn streams one turn and returns the items as Codex keeps them: from
// response.output_item.done, in order.
func codexTurn(t *testing.T, gw *testGateway, body string) []responsesItem {
	t.Helper()
	resp, raw := gw.do(t, http.MethodPost, "/svc/v1/responses", body, "User-Agent", "codex_exec/0.169.0 (Debian 12.0.0; x86_64) xterm (codex_exec; 0.169.0)")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var items []responsesItem
	completed := false
	for _, data := range oaiSSE(t, raw) {
		var ev struct {
			Type string
			Item responsesItem
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "response.output_item.done":
			items = append(items, ev.Item)
		case "response.completed":
			completed = true
		}
	}
	if !completed {
		t.Fatalf("no response.completed in %s", raw)
	}
	return items
}

// codex exec refused at its first request (400 tools[0].type "namespace")
// and exited 1. A turn of each tool kind, end to end.
func TestClients_CodexTools(t *testing.T) {
	gw, rec := newRecordingGateway(t)
	user := func(text string) string {
		return `{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":` + strconv.Quote(text) + `}]}`
	}

	t.Run("hosted tools dropped, the rest served", func(t *testing.T) {
		is := is.New(t)
		items := codexTurn(t, gw, codexBody(`[`+user("List the files with exec_command.")+`]`))
		call := items[len(items)-1]
		is.Equal(call.Type, "function_call")
		is.Equal(call.Name, "exec_command")
		var args struct {
			Cmd         string
			YieldTimeMS json.Number `json:"yield_time_ms"`
		}
		is.NoErr(json.Unmarshal([]byte(call.Arguments), &args))
		var names []string
		for _, tool := range rec.lastRequest().Tools {
			names = append(names, tool.Name)
		}
		is.Equal(strings.Join(names, ","), "exec_command,apply_patch,multi_agent_v1__spawn_agent") // no web_search, no tool_search
	})

	t.Run("a namespaced call comes back under its own name", func(t *testing.T) {
		is := is.New(t)
		items := codexTurn(t, gw, codexBody(`[`+user("Delegate this with multi_agent_v1__spawn_agent.")+`]`))
		call := items[len(items)-1]
		is.Equal(call.Type, "function_call")
		is.Equal(call.Namespace, "multi_agent_v1")
		is.Equal(call.Name, "spawn_agent")

		// Codex replays the call (namespace and all) with its output.
		next := `[` + user("Delegate this with multi_agent_v1__spawn_agent.") + `,
			{"type":"function_call","call_id":"` + call.CallID + `","namespace":"multi_agent_v1","name":"spawn_agent","arguments":` + strconv.Quote(call.Arguments) + `},
			{"type":"function_call_output","call_id":"` + call.CallID + `","output":"agent started"}]`
		items = codexTurn(t, gw, codexBody(next))
		is.Equal(items[len(items)-1].Type, "message")
		is.True(strings.Contains(items[len(items)-1].Content[0].Text, "agent started"))
		is.Equal(rec.lastRequest().Messages[len(rec.lastRequest().Messages)-2].Parts[0].ToolCall.Name, "multi_agent_v1__spawn_agent")
	})

	t.Run("a custom tool's call is a custom_tool_call with raw input", func(t *testing.T) {
		is := is.New(t)
		items := codexTurn(t, gw, codexBody(`[`+user("Fix the typo with apply_patch.")+`]`))
		call := items[len(items)-1]
		is.Equal(call.Type, "custom_tool_call")
		is.Equal(call.Name, "apply_patch")
		is.True(call.Input != "" && !strings.HasPrefix(call.Input, "{")) // the input itself, not JSON arguments

		next := `[` + user("Fix the typo with apply_patch.") + `,
			{"type":"custom_tool_call","call_id":"` + call.CallID + `","name":"apply_patch","input":` + strconv.Quote(call.Input) + `},
			{"type":"custom_tool_call_output","call_id":"` + call.CallID + `","output":"Success. Updated the following files: M a.txt"}]`
		items = codexTurn(t, gw, codexBody(next))
		is.Equal(items[len(items)-1].Type, "message")
		is.True(strings.Contains(items[len(items)-1].Content[0].Text, "Success."))
	})
}
