package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/internal/logtext"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
	"github.com/svcgw/svcgw/upstream/openai"
)

// benchGateway is the real handler over a temp SQLite file and the instant
// fixture (or the given router), with a key funded for any number of calls:
// what one call costs the gateway, without the network.
func benchGateway(b *testing.B, router ...*upstream.Router) (http.Handler, string, *sqlite.Store) {
	return benchGatewayMetrics(b, nil, router...)
}

// benchGatewayMetrics is benchGateway recording into m (nil: no metrics),
// as serve --admin-addr does.
func benchGatewayMetrics(b *testing.B, m *Metrics, router ...*upstream.Router) (http.Handler, string, *sqlite.Store) {
	b.Helper()
	return benchGatewayWith(b, m, nil, router...)
}

// benchGatewayWith is benchGatewayMetrics with its options adjusted by
// opt (nil: none).
func benchGatewayWith(b *testing.B, m *Metrics, opt func(*Options), router ...*upstream.Router) (http.Handler, string, *sqlite.Store) {
	b.Helper()
	ctx := context.Background()
	opts := store.Options{OnCommit: m.ObserveCommit}
	if os.Getenv("BENCH_LEDGER_HOLD") != "" {
		// One commit at the end (the benchmark's Sync) instead of one per
		// 20 ms: what callgrind counts no longer depends on how many
		// batch intervals a run lasted, so the difference between two
		// iteration counts is repeatable.
		opts.BatchSize, opts.QueueSize, opts.BatchInterval = 1<<20, 1<<20, time.Hour
	}
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), opts)
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
	o := Options{
		Logger:  slog.New(logtext.NewHandler(io.Discard, nil)), // as serve logs
		Store:   st,
		Router:  r,
		Metrics: m,
	}
	if opt != nil {
		opt(&o)
	}
	return New(o), secret, st
}

func benchCall(b *testing.B, path, body string, header ...string) {
	benchCallMetrics(b, nil, path, body, header...)
}

func benchCallMetrics(b *testing.B, m *Metrics, path, body string, header ...string) {
	h, key, st := benchGatewayMetrics(b, m)
	benchServe(b, h, key, st, path, body, header...)
}

// benchServe is the benchmark loop of benchCall, on a gateway of the
// caller's.
func benchServe(b *testing.B, h http.Handler, key string, st *sqlite.Store, path, body string, header ...string) {
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

// BenchmarkPipeline_Embeddings is one embeddings call of one short text
// at the default 1,536 dimensions through the whole pipeline and the
// fixture: what svcgw's admission, metering and ledger cost an embedding,
// with the reply's encoding (most of its bytes) included.
func BenchmarkPipeline_Embeddings(b *testing.B) {
	benchCall(b, "/svc/v1/embeddings", `{"model":"text-embedding-3-small","input":"The cat sat on the mat."}`)
}

// BenchmarkPipeline_EmbeddingsBatch is one call of 64 texts at 256
// dimensions, base64: a retrieval index being filled.
func BenchmarkPipeline_EmbeddingsBatch(b *testing.B) {
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = fmt.Sprintf("%q", fmt.Sprintf("Document %d of the corpus, a paragraph or so of text to embed.", i))
	}
	benchCall(b, "/svc/v1/embeddings", `{"model":"m","dimensions":256,"encoding_format":"base64","input":[`+strings.Join(texts, ",")+`]}`)
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

// cannedUpstream is an OpenAI-protocol upstream without the network: each
// call is answered with the bench mock's reply (bench/mock), as a JSON body
// or, for a stream, its SSE frames: a role chunk, 16 content chunks of one
// word, a finish chunk, the usage chunk and [DONE]. What a benchmark over
// it measures is the gateway's own work, both protocol sides included.
type cannedUpstream struct{ body, sse []byte }

func newCannedUpstream() *cannedUpstream {
	const head = `{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":`
	var sse strings.Builder
	frame := func(s string) { sse.WriteString("data: " + s + "\n\n") }
	frame(head + `{"role":"assistant","content":""},"finish_reason":null}]}`)
	for i := range 16 {
		text := " tok"
		if i == 0 {
			text = "tok"
		}
		frame(head + `{"content":"` + text + `"},"finish_reason":null}]}`)
	}
	frame(head + `{},"finish_reason":"stop"}]}`)
	frame(`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`)
	frame("[DONE]")
	body := `{"id":"chatcmpl-mock","object":"chat.completion","created":1700000000,"model":"mock-model","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"tok tok tok tok tok tok tok tok tok tok tok tok tok tok tok tok"}}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	return &cannedUpstream{body: []byte(body), sse: []byte(sse.String())}
}

func (u *cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r, ProtoMajor: 1, ProtoMinor: 1}
	if r.Header.Get("Accept") == "text/event-stream" {
		resp.Header.Set("Content-Type", "text/event-stream")
		resp.Body = io.NopCloser(bytes.NewReader(u.sse))
		resp.ContentLength = -1 // chunked, as a streaming server sends it
	} else {
		resp.Header.Set("Content-Type", "application/json")
		resp.Body = io.NopCloser(bytes.NewReader(u.body))
		resp.ContentLength = int64(len(u.body)) // as bench/mock sends it
	}
	return resp, nil
}

// benchOpenAIRouter routes every call to an OpenAI-protocol backend over
// cannedUpstream, as bench/run.sh routes svcgw to its mock.
func benchOpenAIRouter() *upstream.Router {
	be := openai.New(upstream.HTTPOptions{BaseURL: "http://mock.invalid/v1", APIKey: "bench", Model: "mock-model",
		Limits: upstream.Limits{ContextLength: 128000, MaxCompletionTokens: 16384},
		Client: &http.Client{Transport: newCannedUpstream()}})
	return upstream.NewRouter([]upstream.Candidate{{Name: "mock", Backend: be, Limits: be.Limits()}})
}

// benchLoadBody is the request of bench/load's chat scenarios.
const benchLoadBody = `{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":64}`

// BenchmarkPipeline_ChatOpenAI and BenchmarkPipeline_ChatStreamOpenAI are
// bench/run.sh's (a) and (c) calls through the whole handler, routed over
// the OpenAI protocol to a canned upstream: the gateway's CPU per call
// without the sockets.
func BenchmarkPipeline_ChatOpenAI(b *testing.B) {
	benchRouted(b, benchOpenAIRouter(), "/svc/v1/chat/completions", benchLoadBody)
}

func BenchmarkPipeline_ChatStreamOpenAI(b *testing.B) {
	benchRouted(b, benchOpenAIRouter(), "/svc/v1/chat/completions",
		strings.Replace(benchLoadBody, `"max_tokens":64`, `"max_tokens":64,"stream":true,"stream_options":{"include_usage":true}`, 1))
}

// benchRouted runs one call per iteration and reports, beside time and
// allocations, the flushes per call: each is a write(2) to the caller's
// socket in production, and a stream's count depends on how many of the
// upstream's events the SSE reader's buffer holds at once.
func benchRouted(b *testing.B, r *upstream.Router, path, body string) {
	h, key, st := benchGateway(b, r)
	b.ReportAllocs()
	flushes := 0
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		flushes += w.flushes
	}
	b.StopTimer()
	b.ReportMetric(float64(flushes)/float64(b.N), "flushes/op")
	if err := st.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// flushCounter counts a recorder's flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() {
	f.flushes++
	f.ResponseRecorder.Flush()
}

// cannedEmbedder is an OpenAI-protocol embeddings upstream without the
// network, answering as bench/mock does: every input the same unit vector
// of 1,536 values, nine decimals each as float text, or its float32s as
// base64 when the request asks for encoding_format "base64".
type cannedEmbedder struct{ floats, b64 []byte }

func newCannedEmbedder(dims int) *cannedEmbedder {
	v := make([]float64, dims)
	x, norm := uint32(2463534242), 0.0
	for i := range v {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		v[i] = float64(x)/float64(1<<32) - 0.5
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	f := []byte{'['}
	raw := make([]byte, 0, 4*dims)
	for i := range v {
		if i > 0 {
			f = append(f, ',')
		}
		f = strconv.AppendFloat(f, v[i]/norm, 'f', 9, 64)
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(v[i]/norm)))
	}
	f = append(f, ']')
	return &cannedEmbedder{floats: f, b64: []byte(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)}
}

func (u *cannedEmbedder) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	var req struct {
		Input          []json.RawMessage `json:"input"`
		EncodingFormat string            `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	vec := u.floats
	if req.EncodingFormat == "base64" {
		vec = u.b64
	}
	b := make([]byte, 0, len(req.Input)*(len(vec)+48)+128)
	b = append(b, `{"object":"list","data":[`...)
	for i := range req.Input {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = append(b, vec...)
		b = append(b, '}')
	}
	b = append(b, `],"model":"mock-embedding","usage":{"prompt_tokens":64,"total_tokens":64}}`...)
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r, ProtoMajor: 1, ProtoMinor: 1}
	resp.Header.Set("Content-Type", "application/json")
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	return resp, nil
}

// BenchmarkPipeline_EmbeddingsOpenAI is bench/run.sh's (h) call through
// the whole handler, routed over the OpenAI protocol to cannedEmbedder: 1
// or 8 passages, the caller asking for floats or base64 (the official
// SDKs' default).
func BenchmarkPipeline_EmbeddingsOpenAI(b *testing.B) {
	be := openai.New(upstream.HTTPOptions{BaseURL: "http://mock.invalid/v1", APIKey: "bench", Model: "mock-embedding",
		Client: &http.Client{Transport: newCannedEmbedder(1536)}})
	r := upstream.NewRouter([]upstream.Candidate{{Name: "mock", Backend: be, Limits: be.Limits()}})
	const text = "Photosynthesis is the process by which green plants, algae and some bacteria turn light energy into chemical energy, storing it in sugars made from carbon dioxide and water; chapter "
	for _, n := range []int{1, 8} {
		for _, format := range []string{"float", "base64"} {
			texts := make([]string, n)
			for i := range texts {
				texts[i] = strconv.Quote(text + strconv.Itoa(i+1) + ".")
			}
			body := `{"model":"text-embedding-3-small","input":[` + strings.Join(texts, ",") + `],"encoding_format":"` + format + `"}`
			b.Run(fmt.Sprintf("%dx%s", n, format), func(b *testing.B) {
				h, key, st := benchGateway(b, r)
				b.ReportAllocs()
				before := processCPU(b)
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, "/svc/v1/embeddings", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
				b.StopTimer()
				// CPU per call: what a loaded machine does not change.
				b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
				if err := st.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
