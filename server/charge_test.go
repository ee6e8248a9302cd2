package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/openai"
)

// One end-to-end test per upstream protocol pins a call's absolute charge:
// an httptest upstream reports known usage (cached input, cache writes,
// reasoning), and the micro-dollar amount must come out exactly in
// /generation, /usage and /credits. The prices (chargePrices) and counts
// are chosen so that every rate contributes and the sum has a seventh
// decimal place, which the one rounding (up) must settle.

// chargePrices is every route's price, in USD per million tokens.
func chargePrices() *billing.Prices {
	d := func(s string) apd.Decimal {
		v, _, err := apd.NewFromString(s)
		if err != nil {
			panic(err)
		}
		return *v
	}
	pr := billing.Price{Input: d("3"), Output: d("15"), CachedInput: d("0.30"), CacheWrite: d("3.75"), CacheWrite1h: d("6")}
	p := &billing.Prices{}
	for _, t := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			p.Set(t, tier, pr)
		}
	}
	return p
}

// chargeCase is one upstream protocol: its replies, whole and streamed,
// each reporting the same usage, and what that usage costs.
type chargeCase struct {
	name     string
	backend  func(url string) upstream.Backend
	json     string // the complete reply
	sse      string // the streamed reply
	input    int    // prompt tokens, cached and cache writes included
	cached   int
	output   int // reasoning included
	thinking int
	cost     string // of one call
}

var chargeCases = []chargeCase{
	{
		// 2,000 uncached × 3 + 6,001 cached × 0.30 + 2,000 written × 3.75 +
		// 1,500 output × 15 = 37,800.3 per million → 0.0378003 → 0.037801.
		name: "chat-completions",
		backend: func(url string) upstream.Backend {
			return openai.New(upstream.HTTPOptions{BaseURL: url + "/v1", APIKey: "sk-test", Model: "m"})
		},
		json: `{"id":"chatcmpl-x","object":"chat.completion","created":1767225600,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":10001,"completion_tokens":1500,"total_tokens":11501,"prompt_tokens_details":{"cached_tokens":6001,"cache_write_tokens":2000},"completion_tokens_details":{"reasoning_tokens":500}}}`,
		sse: `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Paris."},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[],` +
			`"usage":{"prompt_tokens":10001,"completion_tokens":1500,"total_tokens":11501,"prompt_tokens_details":{"cached_tokens":6001,"cache_write_tokens":2000},"completion_tokens_details":{"reasoning_tokens":500}}}` + "\n\n" +
			"data: [DONE]\n\n",
		input: 10001, cached: 6001, output: 1500, thinking: 500,
		cost: "0.037801",
	},
	{
		// 2,000 uncached × 3 + 6,001 cached × 0.30 + 1,000 written for 5
		// minutes × 3.75 + 1,000 written for an hour × 6 + 1,500 output × 15
		// = 40,050.3 per million → 0.040051.
		name: "messages",
		backend: func(url string) upstream.Backend {
			return anthropic.New(upstream.HTTPOptions{BaseURL: url, APIKey: "sk-test", Model: "m"})
		},
		json: `{"id":"msg_x","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Paris."}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"usage":{"input_tokens":2000,"cache_read_input_tokens":6001,"cache_creation_input_tokens":2000,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":1000},"output_tokens":1500,"output_tokens_details":{"thinking_tokens":500}}}`,
		sse: "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,` +
			`"usage":{"input_tokens":2000,"cache_read_input_tokens":6001,"cache_creation_input_tokens":2000,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":1000},"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris."}}` + "\n\n" +
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1500,"output_tokens_details":{"thinking_tokens":500}}}` + "\n\n" +
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n",
		input: 10001, cached: 6001, output: 1500, thinking: 500,
		cost: "0.040051",
	},
	{
		// Gemini reports no cache writes: 4,000 uncached × 3 + 6,001 cached
		// × 0.30 + (1,000 candidates + 500 thoughts) × 15 = 36,300.3 per
		// million → 0.036301.
		name: "generate-content",
		backend: func(url string) upstream.Backend {
			return gemini.New(upstream.HTTPOptions{BaseURL: url, APIKey: "test", Model: "m"})
		},
		json: `{"candidates":[{"content":{"role":"model","parts":[{"text":"Paris."}]},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":10001,"cachedContentTokenCount":6001,"candidatesTokenCount":1000,"thoughtsTokenCount":500,"totalTokenCount":11501},"responseId":"r"}`,
		sse: `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Paris."}]},"index":0}],"usageMetadata":{"promptTokenCount":10001,"totalTokenCount":10001},"responseId":"r"}` + "\n\n" +
			`data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":10001,"cachedContentTokenCount":6001,"candidatesTokenCount":1000,"thoughtsTokenCount":500,"totalTokenCount":11501},"responseId":"r"}` + "\n\n",
		input: 10001, cached: 6001, output: 1500, thinking: 500,
		cost: "0.036301",
	},
}

func TestCharge_ExactOnEveryUpstreamProtocol(t *testing.T) {
	for _, tc := range chargeCases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				// Streams are asked for by path (generate-content) or by Accept.
				if strings.Contains(r.URL.Path, ":streamGenerateContent") || r.Header.Get("Accept") == "text/event-stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, tc.sse)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.json)
			}))
			t.Cleanup(up.Close)
			gw := newTestGateway(t, withBackend(tc.backend(up.URL)), func(o *Options) { o.Prices = chargePrices() })

			var ids []string
			// A prompt long enough for the 10,001 input tokens the
			// upstreams report (upstream bounds reported input by svcgw's
			// own count of the prompt).
			prompt := strings.Repeat("Capital of France? ", 1500)
			for _, body := range []string{
				`{"model":"svc-fusion","messages":[{"role":"user","content":"` + prompt + `"}]}`,
				`{"model":"svc-fusion","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`,
			} {
				resp, out := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", body)
				is.Equal(resp.StatusCode, http.StatusOK)
				id := chatID(t, out)
				is.True(id != "")
				ids = append(ids, id)
			}
			mxSync(t, gw)

			for _, id := range ids {
				g := gw.generation(t, id)
				is.Equal(g.TotalCost, tc.cost) // the exact charge of the call
				is.Equal(g.Usage.PromptTokens, tc.input)
				is.Equal(g.Usage.CachedPromptTokens, tc.cached)
				is.Equal(g.Usage.CompletionTokens, tc.output)
				is.Equal(g.Usage.ReasoningTokens, tc.thinking)
			}

			one := microsOf(t, tc.cost)
			u := gw.usage(t, "day")
			is.Equal(len(u.Data), 1)
			b := u.Data[0]
			is.Equal(b.Requests, int64(2))
			is.Equal(b.Cost, usd(2*one)) // two calls, each rounded once
			is.Equal(b.InputTokens, int64(2*tc.input))
			is.Equal(b.CachedInputTokens, int64(2*tc.cached))
			is.Equal(b.OutputTokens, int64(2*tc.output))

			c := gw.credits(t)
			is.Equal(c.TotalUsed, usd(2*one))
			is.Equal(c.Balance, usd(10_000_000-2*one)) // $10.00 of credits
		})
	}
}

// chatID is the id of a chat-completions reply, whole or streamed.
func chatID(t *testing.T, body []byte) string {
	t.Helper()
	s := string(body)
	if strings.HasPrefix(s, "data: ") {
		s, _, _ = strings.Cut(strings.TrimPrefix(s, "data: "), "\n")
	}
	var v struct{ ID string }
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("reply %q: %v", body, err)
	}
	return v.ID
}

// A key's cap reaches admission as whole micro-dollars; one the store
// could not have written (more than six decimals) allows no spend rather
// than any.
func TestCapMicros_FailsClosed(t *testing.T) {
	for _, c := range []struct {
		cap  *apd.Decimal
		want int64
	}{
		{nil, billing.NoCap},
		{apd.New(2_500_000, -6), 2_500_000},
		{apd.New(0, 0), 0},
		{apd.New(1, -7), 0}, // 0.0000001: not a stored amount
	} {
		if got := capMicros(c.cap); got != c.want {
			t.Errorf("capMicros(%v) = %d, want %d", c.cap, got, c.want)
		}
	}
}
