package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// End-to-end tests of the messages surface: Anthropic's official Go SDK
// (github.com/anthropics/anthropic-sdk-go) against the real handler and the
// fixture backend, configured as a user would: base URL {gateway}/svc (the
// SDK appends /v1/messages) and an llm_live_ key.

// msgsClient returns the SDK pointed at the gateway, sending key as
// x-api-key (the SDK's default) with no retries, so failures show at once.
func msgsClient(gw *testGateway, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(gw.URL + "/svc"),
		option.WithAPIKey(gw.Key),
		option.WithMaxRetries(0),
	}, opts...)...)
}

func msgsUser(text string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}
}

// msgsText concatenates a message's text blocks.
func msgsText(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// msgsPDF is a minimal PDF.
var msgsPDF = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Count 0/Kids[]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")

var msgsWeatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name:        "get_weather",
	Description: anthropic.String("Current weather for a city"),
	InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}},
		Required:   []string{"city"},
	},
}}

func TestMessagesSDK_New(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)

	var raw *http.Response
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  msgsUser("Say hello."),
	}, option.WithResponseInto(&raw))
	is.NoErr(err) // messages.create
	is.Equal(msgsText(msg), `Fixture reply to: "Say hello.". This reply is deterministic: the same request always gets the same answer.`)
	is.Equal(string(msg.Model), "claude-sonnet-4-5") // the caller's id, echoed
	is.Equal(string(msg.Role), "assistant")
	is.Equal(string(msg.Type), "message")
	is.True(strings.HasPrefix(msg.ID, "msg_"))
	is.Equal(msg.StopReason, anthropic.StopReasonEndTurn)
	is.Equal(msg.StopSequence, "")
	is.True(msg.Usage.InputTokens > 0)
	is.True(msg.Usage.OutputTokens > 0)
	is.Equal(raw.Header.Get("X-SVC-Request-Type"), "pro")
	is.True(raw.Header.Get("Request-Id") != "") // the SDK's request id header

	// The message id is the generation id and the feedback id.
	is.NoErr(gw.Store.Sync(ctx))
	g := gw.generation(t, msg.ID)
	is.Equal(g.ID, msg.ID)
	is.Equal(g.RequestType, "pro")
	is.True(!g.Streamed)
	is.Equal(g.Usage.PromptTokens, int(msg.Usage.InputTokens))
	is.Equal(g.Usage.CompletionTokens, int(msg.Usage.OutputTokens))
	is.Equal(gw.feedback(t, msg.ID, "up"), http.StatusOK)
	is.Equal(gw.feedback(t, "msg_unknown000000000000000", "up"), http.StatusNotFound)
}

func TestMessagesSDK_Stream(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)
	params := anthropic.MessageNewParams{
		Model:     "svc-fusion",
		MaxTokens: 1024,
		Messages:  msgsUser("Tell me a story."),
	}

	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	var types []string
	deltas := 0
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "content_block_delta" {
			deltas++
		}
		is.NoErr(acc.Accumulate(ev)) // every event fits the accumulator
	}
	is.NoErr(stream.Err()) // stream ends cleanly
	is.NoErr(stream.Close())
	is.Equal(types[0], "message_start")
	is.Equal(types[len(types)-1], "message_stop")
	is.True(deltas >= 3) // the text came in pieces

	// The accumulated message is the one a non-streamed call returns.
	want, err := client.Messages.New(ctx, params)
	is.NoErr(err)
	is.Equal(msgsText(&acc), msgsText(want))
	is.Equal(acc.StopReason, anthropic.StopReasonEndTurn)
	is.Equal(string(acc.Model), "svc-fusion")
	is.Equal(acc.Usage.InputTokens, want.Usage.InputTokens)
	is.Equal(acc.Usage.OutputTokens, want.Usage.OutputTokens)
	is.True(strings.HasPrefix(acc.ID, "msg_"))

	is.NoErr(gw.Store.Sync(ctx))
	g := gw.generation(t, acc.ID)
	is.True(g.Streamed)
	is.Equal(g.FinishReason, "stop")
	is.Equal(g.Usage.CompletionTokens, int(acc.Usage.OutputTokens))
	is.Equal(gw.feedback(t, acc.ID, "down"), http.StatusOK)
}

func TestMessagesSDK_ToolsRoundTrip(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		name := map[bool]string{false: "create", true: "stream"}[streamed]
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			gw := newTestGateway(t)
			client := msgsClient(gw)
			send := func(params anthropic.MessageNewParams) (*anthropic.Message, string) {
				var raw *http.Response
				if !streamed {
					msg, err := client.Messages.New(ctx, params, option.WithResponseInto(&raw))
					is.NoErr(err)
					return msg, raw.Header.Get("X-SVC-Request-Type")
				}
				stream := client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&raw))
				var acc anthropic.Message
				for stream.Next() {
					is.NoErr(acc.Accumulate(stream.Current()))
				}
				is.NoErr(stream.Err())
				return &acc, raw.Header.Get("X-SVC-Request-Type")
			}
			params := anthropic.MessageNewParams{
				Model:     "svc-fusion",
				MaxTokens: 1024,
				Tools:     []anthropic.ToolUnionParam{msgsWeatherTool},
				Messages:  msgsUser("What is the weather in Paris?"),
			}

			first, typ := send(params)
			is.Equal(typ, "code") // tools classify as code
			is.Equal(first.StopReason, anthropic.StopReasonToolUse)
			var call anthropic.ToolUseBlock
			for _, c := range first.Content {
				if c.Type == "tool_use" {
					call = c.AsToolUse()
				}
			}
			is.Equal(call.Name, "get_weather")
			is.True(call.ID != "")
			var args map[string]any
			is.NoErr(json.Unmarshal(call.Input, &args)) // input is a JSON object
			_, ok := args["city"].(string)
			is.True(ok) // with the required property

			// Replay the assistant turn and answer the call.
			params.Messages = append(params.Messages,
				first.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, `{"temp_c":18}`, false)))
			second, typ := send(params)
			is.Equal(typ, "code")
			is.Equal(second.StopReason, anthropic.StopReasonEndTurn)
			is.Equal(msgsText(second), `Fixture received the result of get_weather: "{"temp_c":18}". This reply is deterministic: the same request always gets the same answer.`)
		})
	}
}

func TestMessagesSDK_Document(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)

	var raw *http.Response
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:      "svc-saver", // a low-effort id and tools do not beat a document
		MaxTokens:  512,
		Tools:      []anthropic.ToolUnionParam{msgsWeatherTool},
		ToolChoice: anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.ContentBlockParamUnion{OfDocument: &anthropic.DocumentBlockParam{
				Title:        anthropic.String("report.pdf"),
				Source:       anthropic.DocumentBlockParamSourceUnion{OfBase64: &anthropic.Base64PDFSourceParam{Data: base64.StdEncoding.EncodeToString(msgsPDF)}},
				CacheControl: anthropic.NewCacheControlEphemeralParam(),
			}},
			anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="),
			anthropic.NewTextBlock("Summarise the report."),
		)},
	}, option.WithResponseInto(&raw))
	is.NoErr(err) // a base64 PDF is accepted
	is.Equal(raw.Header.Get("X-SVC-Request-Type"), "document")
	is.Equal(msg.StopReason, anthropic.StopReasonEndTurn)
	is.NoErr(gw.Store.Sync(ctx))
	is.Equal(gw.generation(t, msg.ID).RequestType, "document")

	// Any other document source is a 400 naming the field, before any
	// backend or billing.
	for _, src := range []anthropic.DocumentBlockParamSourceUnion{
		{OfURL: &anthropic.URLPDFSourceParam{URL: "https://example.com/a.pdf"}},
		{OfText: &anthropic.PlainTextSourceParam{Data: "plain text"}},
		{OfFile: &anthropic.FileDocumentSourceParam{FileID: "file_011CNha8iCJcU1wXNR6q4V8w"}},
	} {
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     "svc-fusion",
			MaxTokens: 512,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
				anthropic.NewTextBlock("Read this."),
				anthropic.ContentBlockParamUnion{OfDocument: &anthropic.DocumentBlockParam{Source: src}})},
		})
		var apiErr *anthropic.Error
		is.True(errors.As(err, &apiErr)) // an API error
		is.Equal(apiErr.StatusCode, http.StatusBadRequest)
		is.Equal(string(apiErr.Type()), "invalid_request_error")
		is.True(strings.Contains(apiErr.RawJSON(), "messages.0.content.1.source")) // names the field
	}
}

func TestMessagesSDK_JSONOutput(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)

	var raw *http.Response
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     "svc-fusion",
		MaxTokens: 1024,
		Messages:  msgsUser("Extract: Ada Lovelace, born 1815."),
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": map[string]any{"type": "string"},
				"born": map[string]any{"type": "integer"},
			},
			"required":             []string{"name", "born"},
			"additionalProperties": false,
		}}},
	}, option.WithResponseInto(&raw))
	is.NoErr(err) // output_config.format
	is.Equal(raw.Header.Get("X-SVC-Request-Type"), "json")
	var out struct {
		Name *string `json:"name"`
		Born *int    `json:"born"`
	}
	is.NoErr(json.Unmarshal([]byte(msgsText(msg)), &out)) // the text is JSON
	is.True(out.Name != nil && out.Born != nil)           // matching the schema
}

func TestMessagesSDK_Thinking(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)
	params := anthropic.MessageNewParams{
		Model:     "svc-fusion",
		MaxTokens: 4096,
		Thinking:  anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages:  msgsUser("Why is the sky blue?"),
	}

	var raw *http.Response
	msg, err := client.Messages.New(ctx, params, option.WithResponseInto(&raw))
	is.NoErr(err) // thinking enabled
	is.Equal(raw.Header.Get("X-SVC-Request-Type"), "reason")
	is.True(len(msg.Content) == 2)
	is.Equal(msg.Content[0].Type, "thinking") // thinking first
	is.True(msg.Content[0].Thinking != "")
	is.True(msg.Content[0].Signature != "") // with its signature
	is.Equal(msg.Content[1].Type, "text")

	// Streamed: thinking_delta and signature_delta rebuild the same block.
	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	sawThinkingDelta, sawSignature := false, false
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" {
			switch ev.Delta.Type {
			case "thinking_delta":
				sawThinkingDelta = true
			case "signature_delta":
				sawSignature = true
			}
		}
		is.NoErr(acc.Accumulate(ev))
	}
	is.NoErr(stream.Err())
	is.True(sawThinkingDelta && sawSignature)
	is.Equal(len(acc.Content), 2)
	is.Equal(acc.Content[0].Thinking, msg.Content[0].Thinking)
	// Signatures are sealed afresh each time (server/seal.go): the same
	// signature under two nonces.
	is.Equal(gw.openSignature(t, acc.Content[0].Signature), gw.openSignature(t, msg.Content[0].Signature))
	is.Equal(acc.Content[1].Text, msg.Content[1].Text)

	// The thinking block replays in the history (signature kept).
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And at sunset?")))
	_, err = client.Messages.New(ctx, params)
	is.NoErr(err)

	// Thinking switched off is not reason.
	params.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
	_, err = client.Messages.New(ctx, params, option.WithResponseInto(&raw))
	is.NoErr(err)
	is.True(raw.Header.Get("X-SVC-Request-Type") != "reason")
}

func TestMessagesSDK_CountTokens(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)
	messages := msgsUser("How many tokens is this?")
	system := []anthropic.TextBlockParam{{Text: "Count carefully."}}

	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "svc-fusion", MaxTokens: 256, System: system, Messages: messages,
	})
	is.NoErr(err) // a billed call first, so the snapshot is not all zeros
	is.NoErr(gw.Store.Sync(ctx))
	credits, days, types := gw.credits(t), gw.usage(t, "day"), gw.usage(t, "request_type")
	is.True(credits.TotalUsed != "0.000000")

	var raw *http.Response
	for range 3 {
		n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model: "svc-fusion", System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: system}, Messages: messages,
		}, option.WithResponseInto(&raw))
		is.NoErr(err) // count_tokens
		is.Equal(n.InputTokens, msg.Usage.InputTokens)
	}
	is.Equal(raw.Header.Get("X-SVC-Request-Type"), "") // never classified

	// Raw: the count needs no max_tokens; errors use the native envelope.
	r, body := gw.do(t, http.MethodPost, "/svc/v1/messages/count_tokens",
		`{"model":"m","messages":[{"role":"user","content":"hello"}]}`,
		"Authorization", "", "X-Api-Key", gw.Key, "Anthropic-Version", "2023-06-01")
	is.Equal(r.StatusCode, http.StatusOK)
	is.True(strings.Contains(string(body), `"input_tokens":`))
	r, body = gw.do(t, http.MethodPost, "/svc/v1/messages/count_tokens", `{"model":"m"}`)
	is.Equal(r.StatusCode, http.StatusBadRequest)
	is.Equal(msgsErrorType(t, body), "invalid_request_error")

	is.NoErr(gw.Store.Sync(ctx))
	is.Equal(gw.credits(t), credits)             // balance unchanged
	is.Equal(gw.usage(t, "day"), days)           // usage unchanged
	is.Equal(gw.usage(t, "request_type"), types) // in every grouping
}

func TestMessagesSDK_Models(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)

	page, err := client.Models.List(ctx, anthropic.ModelListParams{})
	is.NoErr(err) // models.list
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		is.True(m.DisplayName != "")
		is.True(m.MaxInputTokens > 0)
		is.True(m.MaxTokens > 0)
	}
	is.Equal(ids, []string{"svc-fusion", "svc-saver", "svc-max"})
	is.True(!page.HasMore)

	// The auto-pager stops after one page.
	n := 0
	iter := client.Models.ListAutoPaging(ctx, anthropic.ModelListParams{})
	for iter.Next() {
		n++
	}
	is.NoErr(iter.Err())
	is.Equal(n, 3)

	m, err := client.Models.Get(ctx, "svc-max", anthropic.ModelGetParams{})
	is.NoErr(err) // models.retrieve
	is.Equal(m.ID, "svc-max")

	// The spec's version header spelling picks the native shape too; no
	// version header gets the chat-completions shape.
	_, body := gw.do(t, http.MethodGet, "/svc/v1/models", "", "X-Msgs-Version", "2023-06-01")
	is.True(strings.Contains(string(body), `"has_more":false`))
	_, body = gw.do(t, http.MethodGet, "/svc/v1/models", "")
	is.True(strings.Contains(string(body), `"object":"list"`))
}

func TestMessagesSDK_PromptCache(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	client := msgsClient(gw)
	// A system prompt well over the 1024-token minimum cacheable prefix.
	long := strings.Repeat("You are a meticulous assistant. Follow the house style guide exactly. ", 120)
	params := anthropic.MessageNewParams{
		Model:     "svc-fusion",
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: long, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages:  msgsUser("Summarise the style guide."),
	}

	first, err := client.Messages.New(ctx, params)
	is.NoErr(err)
	second, err := client.Messages.New(ctx, params)
	is.NoErr(err)
	is.True(first.Usage.CacheCreationInputTokens > 1024) // the first call writes the prefix
	is.Equal(first.Usage.CacheReadInputTokens, int64(0))
	is.True(second.Usage.CacheReadInputTokens > 1024) // the second reads it
	is.Equal(second.Usage.CacheReadInputTokens, first.Usage.CacheCreationInputTokens)
	is.Equal(msgsText(first), msgsText(second))
	total := func(u anthropic.Usage) int64 {
		return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	}
	is.Equal(total(first.Usage), total(second.Usage)) // the same prompt

	is.NoErr(gw.Store.Sync(ctx))
	g1, g2 := gw.generation(t, first.ID), gw.generation(t, second.ID)
	is.Equal(g2.Usage.CachedPromptTokens, int(second.Usage.CacheReadInputTokens))
	is.Equal(g1.Usage.PromptTokens, int(total(first.Usage)))
	c1, _, err := apd.NewFromString(g1.TotalCost)
	is.NoErr(err)
	c2, _, err := apd.NewFromString(g2.TotalCost)
	is.NoErr(err)
	is.True(c2.Cmp(c1) < 0) // the cache read costs less

	var cached int64
	for _, b := range gw.usage(t, "day").Data {
		cached += b.CachedInputTokens
	}
	is.Equal(cached, second.Usage.CacheReadInputTokens) // visible in usage

	// Streamed, the cache counts arrive in message_delta.
	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		is.NoErr(acc.Accumulate(stream.Current()))
	}
	is.NoErr(stream.Err())
	is.Equal(acc.Usage.CacheReadInputTokens, second.Usage.CacheReadInputTokens)
	is.Equal(acc.Usage.InputTokens, second.Usage.InputTokens)
}

// msgsErrorType checks the native error envelope and returns error.type.
func msgsErrorType(t *testing.T, body []byte) string {
	t.Helper()
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID *string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not a JSON envelope: %v: %s", err, body)
	}
	if env.Type != "error" || env.Error.Message == "" {
		t.Fatalf("not the native error envelope: %s", body)
	}
	if env.RequestID == nil || !strings.HasPrefix(*env.RequestID, "req_") {
		t.Fatalf("no request_id in %s", body)
	}
	return env.Error.Type
}

func TestMessagesSDK_InvalidRequests(t *testing.T) {
	gw := newTestGateway(t)
	tests := []struct {
		name string
		body string
		want string // in the message: the field path
	}{
		{"malformed JSON", `{"model":"m",`, "JSON"},
		{"model missing", `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"max_tokens missing", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"max_tokens a string", `{"model":"m","max_tokens":"10","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"messages missing", `{"model":"m","max_tokens":10}`, "messages"},
		{"messages empty", `{"model":"m","max_tokens":10,"messages":[]}`, "messages"},
		{"role tool", `{"model":"m","max_tokens":10,"messages":[{"role":"tool","content":"hi"}]}`, "messages.0.role"},
		{"system messages only", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`, "user or assistant"},
		{"content a number", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":1}]}`, "messages.0.content"},
		{"document URL source", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, "messages.0.content.0.source"},
		{"document file source", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}`, "messages.0.content.0.source"},
		{"document text media type", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"text/plain","data":"aGk="}}]}]}`, "messages.0.content.0.source.media_type"},
		{"server tool", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools.0.type"},
		{"tool without input_schema", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f"}]}`, "tools.0.input_schema"},
		{"tool_choice unknown", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"required"}}`, "tool_choice.type"},
		{"output format without schema", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema"}}}`, "output_config.format.schema"},
		{"thinking budget too large", `{"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":4000}}`, "thinking.budget_tokens"},
		{"bad base64 image", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!"}}]}]}`, "messages.0.content.0.source.data"},
	}
	ctx := context.Background()
	is.New(t).NoErr(gw.Store.Sync(ctx))
	before := gw.credits(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			r, body := gw.do(t, http.MethodPost, "/svc/v1/messages", tt.body,
				"Authorization", "", "X-Api-Key", gw.Key, "Anthropic-Version", "2023-06-01")
			is.Equal(r.StatusCode, http.StatusBadRequest)
			is.Equal(r.Header.Get("Content-Type"), "application/json")
			is.Equal(msgsErrorType(t, body), "invalid_request_error")
			is.True(strings.Contains(string(body), tt.want)) // names the field
		})
	}
	is.New(t).NoErr(gw.Store.Sync(ctx))
	is.New(t).Equal(gw.credits(t), before) // nothing billed
}

func TestMessagesSDK_Auth(t *testing.T) {
	gw := newTestGateway(t)
	ctx := context.Background()
	body := `{"model":"svc-fusion","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`

	t.Run("x-api-key or Bearer, with any version date", func(t *testing.T) {
		for _, h := range [][]string{
			{"Authorization", "", "X-Api-Key", gw.Key, "Anthropic-Version", "2023-06-01"},
			{"Authorization", "", "X-Api-Key", gw.Key, "X-Msgs-Version", "2023-06-01"},
			{"Authorization", "Bearer " + gw.Key, "Anthropic-Version", "2026-03-01"},
			{"Authorization", "Bearer " + gw.Key, "Anthropic-Beta", "structured-outputs-2025-11-13"},
		} {
			is := is.New(t)
			r, b := gw.do(t, http.MethodPost, "/svc/v1/messages?beta=true", body, h...)
			is.Equal(r.StatusCode, http.StatusOK) // accepted
			is.True(strings.Contains(string(b), `"type":"message"`))
		}
	})
	t.Run("SDK with an auth token (Bearer)", func(t *testing.T) {
		is := is.New(t)
		client := anthropic.NewClient(option.WithBaseURL(gw.URL+"/svc"), option.WithAuthToken(gw.Key), option.WithMaxRetries(0))
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "svc-fusion", MaxTokens: 64, Messages: msgsUser("hi")})
		is.NoErr(err)
	})
	t.Run("wrong x-api-key is a 401 in the native envelope", func(t *testing.T) {
		is := is.New(t)
		r, b := gw.do(t, http.MethodPost, "/svc/v1/messages", body,
			"Authorization", "", "X-Api-Key", "llm_live_wrong", "Anthropic-Version", "2023-06-01")
		is.Equal(r.StatusCode, http.StatusUnauthorized)
		is.Equal(msgsErrorType(t, b), "authentication_error")

		client := msgsClient(gw, option.WithAPIKey("llm_live_wrong"))
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "svc-fusion", MaxTokens: 64, Messages: msgsUser("hi")})
		var apiErr *anthropic.Error
		is.True(errors.As(err, &apiErr))
		is.Equal(apiErr.StatusCode, http.StatusUnauthorized)
		is.Equal(string(apiErr.Type()), "authentication_error")
		is.True(apiErr.RequestID != "")
	})
	t.Run("without /svc too", func(t *testing.T) {
		is := is.New(t)
		client := anthropic.NewClient(option.WithBaseURL(gw.URL), option.WithAPIKey(gw.Key), option.WithMaxRetries(0))
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "svc-fusion", MaxTokens: 64, Messages: msgsUser("hi")})
		is.NoErr(err)
	})
}

// msgsScripted is a backend that streams its events, then fails with err
// or, when err is nil, waits for its context to end and records that.
type msgsScripted struct {
	events   []llm.Event
	err      error
	once     sync.Once
	canceled chan struct{}
}

var _ upstream.Backend = (*msgsScripted)(nil)

func (b *msgsScripted) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Kind: llm.KindUpstream, Message: "scripted backend: streams only"}
}

func (b *msgsScripted) Stream(ctx context.Context, _ *llm.Request) (upstream.Stream, error) {
	return &msgsScriptedStream{ctx: ctx, b: b, i: -1}, nil
}

type msgsScriptedStream struct {
	ctx context.Context
	b   *msgsScripted
	i   int
	err error
}

func (s *msgsScriptedStream) Next() bool {
	if s.i+1 < len(s.b.events) {
		s.i++
		return true
	}
	if s.b.err != nil {
		s.err = s.b.err
		return false
	}
	<-s.ctx.Done()
	s.b.once.Do(func() { close(s.b.canceled) })
	s.err = s.ctx.Err()
	return false
}

func (s *msgsScriptedStream) Event() llm.Event { return s.b.events[s.i] }
func (s *msgsScriptedStream) Err() error       { return s.err }
func (s *msgsScriptedStream) Close() error     { return nil }

func msgsWithBackend(b upstream.Backend) gatewayOption {
	return func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "scripted", Backend: b,
			Limits: upstream.Limits{ContextLength: 100000, MaxCompletionTokens: 8000}}})
	}
}

// TestMessagesSDK_MidStreamError: a failure after the first event reaches the
// SDK as an *anthropic.Error from the stream, after the text sent before it.
func TestMessagesSDK_MidStreamError(t *testing.T) {
	is := is.New(t)
	b := &msgsScripted{
		err: &llm.Error{Kind: llm.KindOverloaded, Message: "Overloaded"},
		events: []llm.Event{
			{Type: llm.EventTextDelta, Text: "Once upon"},
			{Type: llm.EventTextDelta, Text: " a time"},
		},
		canceled: make(chan struct{}),
	}
	gw := newTestGateway(t, msgsWithBackend(b))
	client := msgsClient(gw)

	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "svc-fusion", MaxTokens: 64, Messages: msgsUser("story"),
	})
	var acc anthropic.Message
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
		is.NoErr(acc.Accumulate(stream.Current()))
	}
	is.Equal(msgsText(&acc), "Once upon a time") // what came before the failure
	var apiErr *anthropic.Error
	is.True(errors.As(stream.Err(), &apiErr)) // the error event is an API error
	is.Equal(string(apiErr.Type()), "overloaded_error")
	is.True(!strings.Contains(strings.Join(types, " "), "message_stop")) // no success terminator
}

// TestMessagesSDK_Disconnect: a caller that stops reading mid-stream cancels
// the upstream call, and the call is still recorded.
func TestMessagesSDK_Disconnect(t *testing.T) {
	is := is.New(t)
	b := &msgsScripted{
		events:   []llm.Event{{Type: llm.EventTextDelta, Text: "Once upon"}, {Type: llm.EventTextDelta, Text: " a time"}},
		canceled: make(chan struct{}),
	}
	gw := newTestGateway(t, msgsWithBackend(b))
	client := msgsClient(gw)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "svc-fusion", MaxTokens: 64, Messages: msgsUser("story"),
	})
	var id string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "message_start" {
			id = ev.Message.ID
		}
		if stream.Current().Type == "content_block_delta" {
			cancel() // the caller leaves after the first text
			break
		}
	}
	_ = stream.Close()
	is.True(strings.HasPrefix(id, "msg_"))
	select {
	case <-b.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call was not cancelled")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		is.NoErr(gw.Store.Sync(context.Background()))
		r, body := gw.do(t, http.MethodGet, "/svc/v1/generation?id="+id, "")
		if r.StatusCode == http.StatusOK {
			var g struct {
				Data generation `json:"data"`
			}
			is.NoErr(json.Unmarshal(body, &g))
			is.Equal(g.Data.FinishReason, FinishCanceled) // recorded, as canceled
			is.True(g.Data.Streamed)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no generation record for %s: %d %s", id, r.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The fixture's prompt cache is per account: account B never reads a
// prefix account A wrote (which would be cheaper, and would tell B that
// someone sent that prompt), while A's own second call does.
func TestMessagesSDK_PromptCacheIsPerAccount(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	gw := newTestGateway(t)
	keyB, _ := gw.newKey(t, "beta", "10")
	long := strings.Repeat("You are a meticulous assistant. Follow the house style guide exactly. ", 120)
	params := anthropic.MessageNewParams{
		Model:     "svc-fusion",
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: long, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages:  msgsUser("Summarise the style guide."),
	}
	clientA, clientB := msgsClient(gw), msgsClient(gw, option.WithAPIKey(keyB))
	a1, err := clientA.Messages.New(ctx, params)
	is.NoErr(err)
	b1, err := clientB.Messages.New(ctx, params)
	is.NoErr(err)
	a2, err := clientA.Messages.New(ctx, params)
	is.NoErr(err)
	is.True(a1.Usage.CacheCreationInputTokens > 1024)                              // A writes the prefix
	is.Equal(b1.Usage.CacheReadInputTokens, int64(0))                              // B does not read A's prefix
	is.Equal(b1.Usage.CacheCreationInputTokens, a1.Usage.CacheCreationInputTokens) // it writes its own
	is.Equal(a2.Usage.CacheReadInputTokens, a1.Usage.CacheCreationInputTokens)     // A still reads its own
}
