package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// benchGateway is the real handler over a temp SQLite file and the instant
// fixture (or the given router), with a key funded for any number of calls:
// what one call costs the gateway, without the network.
func benchGateway(b *testing.B, router ...*upstream.Router) (http.Handler, string, *store.Store) {
	return benchGatewayMetrics(b, nil, router...)
}

// benchGatewayMetrics is benchGateway recording into m (nil: no metrics),
// as serve --admin-addr does.
func benchGatewayMetrics(b *testing.B, m *Metrics, router ...*upstream.Router) (http.Handler, string, *store.Store) {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), store.Options{OnCommit: m.ObserveCommit})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	acct, _, err := st.EnsureAccount(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	secret, _, err := st.CreateKey(ctx, acct.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	amt, _, _ := apd.NewFromString("1000000")
	if _, err := st.AddCredits(ctx, acct.ID, *amt, "bench"); err != nil {
		b.Fatal(err)
	}
	fx := fixture.New(fixture.Options{})
	r := upstream.NewRouter([]upstream.Candidate{{Name: "fixture", Backend: fx}})
	if len(router) > 0 {
		r = router[0]
	}
	srv := New(Options{
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Store:   st,
		Router:  r,
		Metrics: m,
	})
	return srv, secret, st
}

func benchCall(b *testing.B, path, body string, header ...string) {
	benchCallMetrics(b, nil, path, body, header...)
}

func benchCallMetrics(b *testing.B, m *Metrics, path, body string, header ...string) {
	h, key, st := benchGatewayMetrics(b, m)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
	b.StopTimer()
	if err := st.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
}

const benchChat = `{"model":"svc-fusion","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about the sea, please."}],"max_tokens":256}`

// BenchmarkPipeline_Chat is one non-streaming chat completion through the
// whole handler: auth, decode, classify, admission, fixture, encode, meter.
func BenchmarkPipeline_Chat(b *testing.B) {
	benchCall(b, "/svc/v1/chat/completions", benchChat)
}

func BenchmarkPipeline_ChatStream(b *testing.B) {
	benchCall(b, "/svc/v1/chat/completions", benchChatStream)
}

var benchChatStream = strings.Replace(benchChat, `"max_tokens":256`, `"max_tokens":256,"stream":true,"stream_options":{"include_usage":true}`, 1)

// BenchmarkPipeline_ChatMetrics and _ChatStreamMetrics are the same calls
// with metrics recorded (serve --admin-addr): the difference is what the
// metrics cost a call.
func BenchmarkPipeline_ChatMetrics(b *testing.B) {
	benchCallMetrics(b, NewMetrics(MetricsOptions{}), "/svc/v1/chat/completions", benchChat)
}

func BenchmarkPipeline_ChatStreamMetrics(b *testing.B) {
	benchCallMetrics(b, NewMetrics(MetricsOptions{}), "/svc/v1/chat/completions", benchChatStream)
}

func BenchmarkPipeline_Messages(b *testing.B) {
	benchCall(b, "/svc/v1/messages", `{"model":"m","max_tokens":256,"messages":[{"role":"user","content":"Write a haiku about the sea, please."}]}`, "Anthropic-Version", "2023-06-01")
}

func BenchmarkPipeline_GenContent(b *testing.B) {
	benchCall(b, "/svc/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"Write a haiku about the sea, please."}]}]}`)
}
