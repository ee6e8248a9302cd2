package server

import (
	"context"
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
