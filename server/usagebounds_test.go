package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/openai"
)

// absurdUpstream is a chat-completions upstream that reports whatever usage
// the test sets, for replies and streams alike.
type absurdUpstream struct {
	mu     sync.Mutex
	prompt int64
	output int64
	none   bool // report no usage at all
}

func (u *absurdUpstream) report(prompt, output int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.prompt, u.output = prompt, output
}

func (u *absurdUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	u.mu.Lock()
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":0}`, u.prompt, u.output)
	none := u.none
	u.mu.Unlock()
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		if none {
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}]}`)
			return
		}
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":%s}`, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello."}}]}`+"\n\n")
	fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
	if !none {
		fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":%s}`+"\n\n", usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// An upstream that reports absurd usage is charged at what the call could
// have used, never overflowing into a dropped record (a free call), with a
// WARN naming the upstream in the operator's log.
func TestGateway_AbsurdUpstreamUsageIsBoundedAndCharged(t *testing.T) {
	up := &absurdUpstream{}
	hs := httptest.NewServer(up)
	t.Cleanup(hs.Close)
	var logMu sync.Mutex
	var logs bytes.Buffer
	gw := newTestGateway(t, func(o *Options) {
		lim := upstream.Limits{ContextLength: 128000, MaxCompletionTokens: 16384}
		b := openai.New(upstream.HTTPOptions{BaseURL: hs.URL, Model: "m", Limits: lim})
		o.Router = upstream.NewRouterWithOptions(
			upstream.RouterOptions{Logger: slog.New(slog.NewTextHandler(&lockedWriter{mu: &logMu, w: &logs}, nil))},
			[]upstream.Candidate{{Name: "vendor/m", Backend: b, Limits: lim}})
	})

	// svc-fusion is pro/medium: $1.25 in, $10 out per million tokens.
	tests := []struct {
		name           string
		prompt, output int64
		maxTokens      string // the request's max_tokens field, if any
		stream         bool
		wantIn, wantOu int
		wantCost       string
		warns          bool
	}{
		// "Hi" in one message is 5 tokens by svcgw's count: input is
		// bounded at 2×5 + 1,024 (see upstream's boundsFor), output at
		// the model's max completion tokens.
		{"9e18 tokens each way, no max_tokens", 9e18, 9e18, "", false,
			1034, 16384, "0.165133", true}, // 1034×1.25 + 16384×10 µ$, rounded up
		{"9e18 tokens each way, streamed", 9e18, 9e18, "", true,
			1034, 16384, "0.165133", true},
		{"2,000,000 input tokens for a 5-token prompt and max_tokens 10", 2_000_000, 10, `"max_tokens":10,`, false,
			1034, 10, "0.001393", true}, // 1034×1.25 + 10×10 µ$, rounded up
		{"2,000,000 input tokens for a 5-token prompt, streamed", 2_000_000, 10, `"max_tokens":10,`, true,
			1034, 10, "0.001393", true},
		// Negative counts are no counts: svcgw's own estimates stand in
		// (-1 below), so a broken report never makes a call free.
		{"negative tokens", -5, -7, "", false, -1, -1, "", true},
		{"negative tokens, streamed", -5, -7, "", true, -1, -1, "", true},
		{"1,000,000 output tokens for max_tokens 10", 12, 1_000_000, `"max_tokens":10,`, false,
			12, 10, "0.000115", true}, // 12×1.25 + 10×10 = 115 µ$
		{"1,000,000 output tokens for max_tokens 10, streamed", 12, 1_000_000, `"max_tokens":10,`, true,
			12, 10, "0.000115", true},
		{"honest usage is charged as reported", 12, 8, `"max_tokens":10,`, false,
			12, 8, "0.000095", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			logMu.Lock()
			logs.Reset()
			logMu.Unlock()
			up.report(tt.prompt, tt.output)
			before := gw.account(t, gw.Key)

			body := `{"model":"svc-fusion",` + tt.maxTokens + `"messages":[{"role":"user","content":"Hi"}]`
			if tt.stream {
				body += `,"stream":true`
			}
			resp, raw := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", body+"}")
			is.Equal(resp.StatusCode, http.StatusOK) // the call is answered
			id := completionID(t, raw, tt.stream)

			g := gw.generation(t, id) // the generation was recorded, not dropped
			if tt.wantIn < 0 {
				// svcgw's estimates of the prompt and of the reply.
				is.True(g.Usage.PromptTokens > 0)     // input estimated
				is.True(g.Usage.CompletionTokens > 0) // output estimated from what was delivered
				tt.wantIn, tt.wantOu = g.Usage.PromptTokens, g.Usage.CompletionTokens
				tt.wantCost = usd((int64(tt.wantIn)*125 + int64(tt.wantOu)*1000 + 99) / 100)
			}
			is.Equal(g.Usage.PromptTokens, tt.wantIn)
			is.Equal(g.Usage.CompletionTokens, tt.wantOu)
			is.Equal(g.TotalCost, tt.wantCost)

			after := gw.account(t, gw.Key)
			charged := micros(t, before.Balance) - micros(t, after.Balance)
			is.Equal(usd(charged), tt.wantCost) // the balance paid exactly the recorded cost
			is.True(micros(t, after.Balance) > 0)

			logMu.Lock()
			line := logs.String()
			logMu.Unlock()
			is.Equal(strings.Contains(line, "level=WARN"), tt.warns)
			if tt.warns {
				is.True(strings.Contains(line, "candidate=vendor/m")) // the WARN names the upstream
			}
		})
	}
}

// completionID is the id of a chat completion, whole or streamed.
func completionID(t *testing.T, raw []byte, stream bool) string {
	t.Helper()
	if stream {
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
				raw = []byte(data)
				break
			}
		}
	}
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.ID == "" {
		t.Fatalf("no id in %s: %v", raw, err)
	}
	return v.ID
}

// lockedWriter serialises writes to w, for a log read while handlers run.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// An upstream that reports no usage at all (an OpenAI-compatible server that
// ignores stream_options.include_usage, or omits usage from its replies)
// must not make calls free: svcgw's estimates of the prompt and of the
// reply it delivered are charged. (The openai backend estimates a missing
// usage itself; a negative one, above, is filled in by the server.)
func TestGateway_UnreportedUsageIsChargedAtTheEstimate(t *testing.T) {
	up := &absurdUpstream{none: true}
	hs := httptest.NewServer(up)
	t.Cleanup(hs.Close)
	gw := newTestGateway(t, func(o *Options) {
		b := openai.New(upstream.HTTPOptions{BaseURL: hs.URL, Model: "m"})
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "vendor/m", Backend: b}})
	})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			is := is.New(t)
			before := gw.account(t, gw.Key)
			body := `{"model":"svc-fusion","messages":[{"role":"user","content":"Hi there"}]`
			if stream {
				body += `,"stream":true`
			}
			resp, raw := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", body+"}")
			is.Equal(resp.StatusCode, http.StatusOK)
			g := gw.generation(t, completionID(t, raw, stream))
			is.True(g.Usage.PromptTokens > 0)     // the prompt estimate
			is.True(g.Usage.CompletionTokens > 0) // the estimate of "Hello."
			is.True(g.TotalCost != "0.000000")    // never free
			after := gw.account(t, gw.Key)
			is.Equal(usd(micros(t, before.Balance)-micros(t, after.Balance)), g.TotalCost)
		})
	}
}
