package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/upstream"
)

// Stop sequences an upstream protocol cannot take are applied by the
// gateway (upstream/stop.go), and the caller sees its own format's finish:
// the fake upstreams answer mxText whatever stops they are sent.

// mxSentStops returns what a fake got as stop sequences.
func mxSentStops(t *testing.T, f *mxFake) []string {
	t.Helper()
	var b struct {
		Stop             []string `json:"stop"`
		StopSequences    []string `json:"stop_sequences"`
		GenerationConfig struct {
			StopSequences []string `json:"stopSequences"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(f.last(t).Raw, &b); err != nil {
		t.Fatal(err)
	}
	switch f.proto {
	case mxOpenAI:
		return b.Stop
	case mxAnthropic:
		return b.StopSequences
	}
	return b.GenerationConfig.StopSequences
}

func TestStopSequences_MessagesOverChatCompletions(t *testing.T) {
	// Five stop_sequences (Anthropic sets no count) reach a chat-completions
	// upstream as four; the fifth still stops the reply, and stop_sequence
	// names it, as Anthropic's API would.
	fake := newMXFake(t, mxOpenAI)
	env := newMXEnv(t, upstream.RouterOptions{}, fake.candidate("openai"))
	client := msgsClient(env.gw)
	stops := []string{"<END>", "STOP", "###", "Human:", " capital"}
	params := anthropic.MessageNewParams{Model: "svc-fusion", MaxTokens: 256,
		Messages: msgsUser("What is the capital of France?"), StopSequences: stops}
	ctx := context.Background()

	t.Run("complete", func(t *testing.T) {
		is := is.New(t)
		m, err := client.Messages.New(ctx, params)
		is.NoErr(err)
		is.Equal(mxSentStops(t, fake), stops[:4]) // the protocol's cap
		is.Equal(msgsText(m), "Paris is the")
		is.Equal(m.StopReason, anthropic.StopReasonStopSequence)
		is.Equal(m.StopSequence, " capital")
	})
	t.Run("stream", func(t *testing.T) {
		is := is.New(t)
		s := client.Messages.NewStreaming(ctx, params, anthropicoption.WithMaxRetries(0))
		var m anthropic.Message
		for s.Next() {
			is.NoErr(m.Accumulate(s.Current()))
		}
		is.NoErr(s.Err())
		is.Equal(mxSentStops(t, fake), stops[:4])
		is.Equal(msgsText(&m), "Paris is the")
		is.Equal(m.StopReason, anthropic.StopReasonStopSequence)
		is.Equal(m.StopSequence, " capital")
		is.True(m.Usage.OutputTokens > 0) // a cut stream is still metered
	})
}

func TestStopSequences_GenContentOverChatCompletions(t *testing.T) {
	fake := newMXFake(t, mxOpenAI)
	env := newMXEnv(t, upstream.RouterOptions{}, fake.candidate("openai"))
	client := genaiClient(t, env.gw.URL+"/svc/", env.gw.Key)
	stops := []string{"<END>", "STOP", "###", "Human:", " of "}
	cfg := &genai.GenerateContentConfig{StopSequences: stops}
	ctx := context.Background()

	t.Run("complete", func(t *testing.T) {
		is := is.New(t)
		r, err := client.Models.GenerateContent(ctx, "gemini-2.5-pro", genaiUserText("What is the capital of France?"), cfg)
		is.NoErr(err)
		is.Equal(mxSentStops(t, fake), stops[:4])
		is.Equal(r.Text(), "Paris is the capital")
		is.Equal(r.Candidates[0].FinishReason, genai.FinishReasonStop)
	})
	t.Run("stream", func(t *testing.T) {
		is := is.New(t)
		var text strings.Builder
		var finish genai.FinishReason
		for r, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-pro", genaiUserText("What is the capital of France?"), cfg) {
			is.NoErr(err)
			text.WriteString(r.Text())
			if len(r.Candidates) > 0 && r.Candidates[0].FinishReason != "" {
				finish = r.Candidates[0].FinishReason
			}
		}
		is.Equal(text.String(), "Paris is the capital")
		is.Equal(finish, genai.FinishReasonStop)
	})
}

func TestStopSequences_ChatOverMessages(t *testing.T) {
	// A chat-completions "\n" is white space only, which the messages
	// protocol refuses: the other sequence goes upstream, and the gateway
	// applies both.
	fake := newMXFake(t, mxAnthropic)
	env := newMXEnv(t, upstream.RouterOptions{}, fake.candidate("anthropic"))
	client := oaiClient(env.gw, env.gw.Key)
	params := openai.ChatCompletionNewParams{Model: "svc-fusion",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the capital of France?")},
		Stop:     openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"\n", " of "}}}
	ctx := context.Background()

	t.Run("complete", func(t *testing.T) {
		is := is.New(t)
		cc, err := client.Chat.Completions.New(ctx, params)
		is.NoErr(err)
		is.Equal(mxSentStops(t, fake), []string{" of "})
		is.Equal(cc.Choices[0].Message.Content, "Paris is the capital")
		is.Equal(cc.Choices[0].FinishReason, "stop")
	})
	t.Run("stream", func(t *testing.T) {
		is := is.New(t)
		s := client.Chat.Completions.NewStreaming(ctx, params, option.WithMaxRetries(0))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			is.True(acc.AddChunk(s.Current()))
		}
		is.NoErr(s.Err())
		is.Equal(acc.Choices[0].Message.Content, "Paris is the capital")
		is.Equal(acc.Choices[0].FinishReason, "stop")
	})
}
