package upstream_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// reporting is a backend whose replies report usage u.
func reporting(u llm.Usage) *fakeBackend {
	return &fakeBackend{
		CompleteFn: func(context.Context, *llm.Request) (*llm.Response, error) {
			return &llm.Response{Content: []llm.Part{llm.TextPart("hi")}, FinishReason: llm.FinishStop, Usage: u}, nil
		},
		StreamFn: func(context.Context, *llm.Request) (upstream.Stream, error) {
			uu := u
			return &sliceStream{events: []llm.Event{
				{Type: llm.EventTextDelta, Text: "hi"},
				{Type: llm.EventFinish, FinishReason: llm.FinishStop, Usage: &uu},
			}}, nil
		},
	}
}

func TestRouter_boundsReportedUsage(t *testing.T) {
	lim := upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 32000}
	tests := []struct {
		name      string
		maxTokens int
		parts     []llm.Part // the prompt's one message; "hi" when nil
		lim       upstream.Limits
		reported  llm.Usage
		want      llm.Usage
		warns     bool
	}{
		{"sane usage passes unchanged", 100, nil, lim,
			llm.Usage{InputTokens: 500, OutputTokens: 80, CachedInputTokens: 100, ReasoningTokens: 20},
			llm.Usage{InputTokens: 500, OutputTokens: 80, CachedInputTokens: 100, ReasoningTokens: 20}, false},
		{"output is capped at max_tokens", 10, nil, lim,
			llm.Usage{InputTokens: 12, OutputTokens: 1_000_000},
			llm.Usage{InputTokens: 12, OutputTokens: 10}, true},
		{"without max_tokens, at the model's max completion tokens", 0, nil, lim,
			llm.Usage{InputTokens: 12, OutputTokens: 9_000_000_000_000_000_000},
			llm.Usage{InputTokens: 12, OutputTokens: 32000}, true},
		// "hi" in one message is 5 tokens by svcgw's count (llm.InputTokens):
		// the bound is twice that plus 1,024.
		{"input is capped at svcgw's count of the prompt, with its margin", 10, nil, lim,
			llm.Usage{InputTokens: 2_000_000, OutputTokens: 5},
			llm.Usage{InputTokens: 2*5 + 1024, OutputTokens: 5}, true},
		{"input at the margin's edge passes unchanged", 10, nil, lim,
			llm.Usage{InputTokens: 2*5 + 1024, OutputTokens: 5},
			llm.Usage{InputTokens: 2*5 + 1024, OutputTokens: 5}, false},
		{"each image widens the margin by 16,384", 0, []llm.Part{llm.TextPart("hi"), {Type: llm.PartImage, URL: "https://example.com/a.png"}}, lim,
			llm.Usage{InputTokens: 2_000_000, OutputTokens: 5},
			llm.Usage{InputTokens: 2*(5+765) + 1024 + 16384, OutputTokens: 5}, true},
		{"an opaque reasoning replay widens it by its bytes", 0, []llm.Part{llm.TextPart("hi"), {Type: llm.PartReasoning, Signature: strings.Repeat("x", 3000)}}, lim,
			llm.Usage{InputTokens: 2_000_000, OutputTokens: 5},
			llm.Usage{InputTokens: 2*5 + 1024 + 3000, OutputTokens: 5}, true},
		{"a prompt with a document is capped at the context length", 0, []llm.Part{llm.TextPart("hi"), {Type: llm.PartDocument, MediaType: "application/pdf", Data: []byte("%PDF-1.7")}}, lim,
			llm.Usage{InputTokens: 9_000_000_000_000_000_000, OutputTokens: 5},
			llm.Usage{InputTokens: 200000, OutputTokens: 5}, true},
		{"the margin never exceeds the context length", 0, []llm.Part{llm.TextPart(strings.Repeat("word ", 150000))}, lim,
			llm.Usage{InputTokens: 9_000_000_000_000_000_000, OutputTokens: 5},
			llm.Usage{InputTokens: 200000, OutputTokens: 5}, true},
		{"unknown limits cap at a hundred million", 0, []llm.Part{{Type: llm.PartDocument, MediaType: "application/pdf", Data: []byte("%PDF-1.7")}}, upstream.Limits{},
			llm.Usage{InputTokens: 9_000_000_000_000_000_000, OutputTokens: 9_000_000_000_000_000_000},
			llm.Usage{InputTokens: 100_000_000, OutputTokens: 100_000_000}, true},
		{"negative counts become zero", 0, nil, lim,
			llm.Usage{InputTokens: -5, OutputTokens: -7, CachedInputTokens: -1, CacheCreationTokens: -2, ReasoningTokens: -3},
			llm.Usage{}, true},
		{"parts never exceed their totals; cache reads give way to writes", 0, nil, lim,
			llm.Usage{InputTokens: 100, CachedInputTokens: 80, CacheCreationTokens: 60, CacheCreation1hTokens: 70,
				OutputTokens: 10, ReasoningTokens: 50},
			llm.Usage{InputTokens: 100, CachedInputTokens: 40, CacheCreationTokens: 60, CacheCreation1hTokens: 60,
				OutputTokens: 10, ReasoningTokens: 10}, true},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += " (stream)"
			}
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				var logs bytes.Buffer
				r := upstream.NewRouterWithOptions(upstream.RouterOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
					[]upstream.Candidate{{Name: "acme/big-model", Backend: reporting(tt.reported), Limits: tt.lim}})
				parts := tt.parts
				if parts == nil {
					parts = []llm.Part{llm.TextPart("hi")}
				}
				req := &llm.Request{MaxTokens: tt.maxTokens, Messages: []llm.Message{{Role: llm.RoleUser, Parts: parts}}}
				var got llm.Usage
				if stream {
					s, _, err := r.Stream(context.Background(), llm.TypePro, llm.TierMedium, req)
					is.NoErr(err) // stream
					for s.Next() {
						if ev := s.Event(); ev.Type == llm.EventFinish {
							got = *ev.Usage
						}
					}
					is.NoErr(s.Err())
					s.Close()
				} else {
					resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, req)
					is.NoErr(err) // complete
					got = resp.Usage
				}
				is.Equal(got, tt.want)
				line := logs.String()
				is.Equal(strings.Contains(line, "level=WARN"), tt.warns) // a WARN exactly when usage was out of bounds
				if tt.warns {
					is.True(strings.Contains(line, "candidate=acme/big-model")) // the WARN names the upstream
				}
			})
		}
	}
}

func TestRouter_boundsInputByTheServersCount(t *testing.T) {
	is := is.New(t)
	r := upstream.NewRouterWithOptions(upstream.RouterOptions{Logger: slog.New(slog.DiscardHandler)},
		[]upstream.Candidate{{Name: "acme/big-model", Backend: reporting(llm.Usage{InputTokens: 2_000_000}),
			Limits: upstream.Limits{ContextLength: 200000}}})
	// The server counted the prompt as 300 tokens (say, with parts this
	// request no longer shows): that count, not a recount, is the bound.
	req := &llm.Request{PromptTokens: 300, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	resp, _, err := r.Complete(context.Background(), llm.TypePro, llm.TierMedium, req)
	is.NoErr(err)                                // complete
	is.Equal(resp.Usage.InputTokens, 2*300+1024) // bounded by the server's count
}
