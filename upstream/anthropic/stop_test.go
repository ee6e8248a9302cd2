package anthropic_test

import (
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestStopSequences_OverTheProtocolLimit(t *testing.T) {
	// messages refuses white space only.
	protocoltest.StopsOverTheLimit(t, protocoltest.StopCase{
		New:   func(o upstream.HTTPOptions) upstream.Backend { return anthropic.New(o) },
		Key:   "stop_sequences",
		Stops: []string{"\n", "END", " \t"},
		Sent:  []string{"END"},
		Text:  "First line of the answer.", Seq: "\n",
		Usage: llm.Usage{InputTokens: 2140, CachedInputTokens: 2000, CacheCreationTokens: 100, OutputTokens: 12},
		StreamUsage: func(*llm.Request) llm.Usage {
			// message_start reported the input and cache counts.
			return llm.Usage{InputTokens: 2140, CachedInputTokens: 2000, CacheCreationTokens: 100,
				OutputTokens: protocoltest.EstimateOf("First line of the ", "answer.", "\nSecond line.")}
		},
	})
}

func TestStopSequences_WithinTheLimitAllGoUpstream(t *testing.T) {
	is := is.New(t)
	f := protocoltest.Replay(t, "stop.json")
	_, err := anthropic.New(protocoltest.Options(f, "")).Complete(protocoltest.Context(t), protocoltest.StopRequest(false, "END", "\nHuman:"))
	is.NoErr(err)
	is.Equal(protocoltest.SentStops(t, f, "stop_sequences"), []string{"END", "\nHuman:"}) // white space around text is fine
}
