package gemini_test

import (
	"testing"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/internal/protocoltest"
)

func TestStopSequences_OverTheProtocolLimit(t *testing.T) {
	// generate-content takes 5.
	protocoltest.StopsOverTheLimit(t, protocoltest.StopCase{
		New:   func(o upstream.HTTPOptions) upstream.Backend { return gemini.New(o) },
		Key:   "stopSequences",
		Stops: []string{"omega", "zeta", "iota", "kappa", "lambda", "delta"},
		Sent:  []string{"omega", "zeta", "iota", "kappa", "lambda"},
		Text:  "Alpha, beta, gamma, ", Seq: "delta",
		Usage: llm.Usage{InputTokens: 80, CachedInputTokens: 64, OutputTokens: 9},
		StreamUsage: func(*llm.Request) llm.Usage {
			// The chunk that completes the sequence carries the last snapshot.
			return llm.Usage{InputTokens: 80, CachedInputTokens: 64, OutputTokens: 9}
		},
	})
}
