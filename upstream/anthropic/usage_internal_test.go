package anthropic

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// Sums of reported counts saturate instead of wrapping around to a small
// or negative number, which no later bound could tell from a real one.
func TestCanonicalUsage_sumsSaturate(t *testing.T) {
	is := is.New(t)
	var an anUsage
	is.NoErr(json.Unmarshal([]byte(`{"input_tokens":9000000000000000000,"cache_read_input_tokens":9000000000000000000,
		"cache_creation_input_tokens":9000000000000000000,"output_tokens":9000000000000000000}`), &an))
	u := an.canonical()
	is.Equal(u.InputTokens, math.MaxInt) // input + reads + writes saturate
	is.True(u.OutputTokens > 0)
}

func TestAnthropicUsage(t *testing.T) {
	is := is.New(t)
	n := func(v int) *int { return &v }
	// A stream: message_start reports input and cache counts, message_delta
	// the cumulative ones (newer API) or only output (older API).
	var u anUsage
	u.merge(&anUsage{InputTokens: n(10), CacheReadInputTokens: n(100), CacheCreationInputTokens: n(50), OutputTokens: n(1)})
	u.merge(&anUsage{OutputTokens: n(20)})
	is.Equal(u.canonical(), llm.Usage{InputTokens: 160, CachedInputTokens: 100, CacheCreationTokens: 50, OutputTokens: 20})
	u.merge(&anUsage{InputTokens: n(10), CacheReadInputTokens: n(100), CacheCreationInputTokens: n(50), OutputTokens: n(30)})
	is.Equal(u.canonical().InputTokens, 160) // reported twice, counted once
	// Only the split: the flat count is its sum.
	split := anUsage{InputTokens: n(5)}
	split.CacheCreation = &struct {
		Ephemeral5m *int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h *int `json:"ephemeral_1h_input_tokens"`
	}{n(7), n(11)}
	is.Equal(split.canonical(), llm.Usage{InputTokens: 23, CacheCreationTokens: 18, CacheCreation1hTokens: 11})
}
