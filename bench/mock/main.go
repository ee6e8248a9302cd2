//go:build bench

// Command mock is a minimal OpenAI-compatible upstream for the benchmark
// (bench/README.md): POST /v1/chat/completions answers with a fixed
// completion, as one JSON body or, with "stream": true, as SSE chunks ending
// in the usage-only chunk (when stream_options.include_usage asks for it)
// and data: [DONE]. It answers instantly by default; flags add a fixed
// latency before the response headers and shape the stream.
//
// POST /v1/embeddings answers OpenAI's embeddings reply: one vector of
// -embed-dims floats per input (the same vector each time, written as
// OpenAI writes them, nine decimals, or with encoding_format "base64" the
// base64 of its float32s), with usage.
//
// The stream shape can be changed while it runs, so that one mock serves
// every scenario: POST /_mock/shape?chunks=20&chunk_delay=500ms (any of
// latency, chunks, chunk_delay, tokens_per_chunk) replaces the named
// fields and answers with the shape now in force.
//
// With -h2c it serves unencrypted HTTP/2 with prior knowledge beside
// HTTP/1.1 on the same port (a server tells them apart by the HTTP/2
// preface), so one mock serves an upstream reached either way.
//
// It is a bench tool, not part of svcgw: it imports nothing of the module.
package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// shape is how the mock answers. It is immutable once published; /_mock/shape
// swaps in a new one.
type shape struct {
	Latency        time.Duration `json:"latency"`          // before the response headers
	Chunks         int           `json:"chunks"`           // content chunks per stream
	ChunkDelay     time.Duration `json:"chunk_delay"`      // between stream chunks
	TokensPerChunk int           `json:"tokens_per_chunk"` // words of content per chunk
	PromptTokens   int           `json:"prompt_tokens"`    // reported usage
	Usage          bool          `json:"usage"`            // report usage at all

	// Pre-rendered bodies, so the mock spends its time on HTTP, not JSON.
	body        []byte   // the non-streaming response
	frames      [][]byte // role chunk, content chunks, finish chunk
	usageFrame  []byte
	completions int // completion tokens of the non-streaming reply
}

const done = "data: [DONE]\n\n"

func (s *shape) render() error {
	if s.Chunks < 1 || s.TokensPerChunk < 1 {
		return errors.New("chunks and tokens_per_chunk must be at least 1")
	}
	const id, model, created = "chatcmpl-mock", "mock-model", 1700000000
	words := strings.TrimSuffix(strings.Repeat("tok ", s.TokensPerChunk), " ")
	s.completions = s.Chunks * s.TokensPerChunk
	content := strings.TrimSuffix(strings.Repeat(words+" ", s.Chunks), " ")
	usage := map[string]int{"prompt_tokens": s.PromptTokens, "completion_tokens": s.completions, "total_tokens": s.PromptTokens + s.completions}

	resp := map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content},
		}},
	}
	if s.Usage {
		resp["usage"] = usage
	}
	var err error
	if s.body, err = json.Marshal(resp); err != nil {
		return err
	}

	chunk := func(delta map[string]any, finish any) []byte {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		return []byte("data: " + string(b) + "\n\n")
	}
	s.frames = s.frames[:0]
	s.frames = append(s.frames, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i := 0; i < s.Chunks; i++ {
		text := words
		if i > 0 {
			text = " " + words
		}
		s.frames = append(s.frames, chunk(map[string]any{"content": text}, nil))
	}
	s.frames = append(s.frames, chunk(map[string]any{}, "stop"))
	u, _ := json.Marshal(map[string]any{
		"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
		"choices": []any{}, "usage": usage,
	})
	s.usageFrame = []byte("data: " + string(u) + "\n\n")
	return nil
}

// chatRequest is the part of a chat-completions request the mock reads.
type chatRequest struct {
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type mock struct {
	shape    atomic.Pointer[shape]
	requests atomic.Int64
	// embedding is one vector as JSON text, rendered once;
	// embedding64 the same as a base64 JSON string.
	embedding, embedding64 []byte
}

// renderEmbedding returns a unit vector of dims floats as JSON text, its
// values spread as a model's are (a fixed pseudo-random sequence), and as
// a JSON string of the base64 of its float32s.
func renderEmbedding(dims int) (floats, b64 []byte) {
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
	b := []byte{'['}
	raw := make([]byte, 0, 4*dims)
	for i := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, v[i]/norm, 'f', 9, 64)
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(v[i]/norm)))
	}
	return append(b, ']'), []byte(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)
}

// embeddings answers an embeddings request: one vector per input (a
// string is one input, an array one per element), prompt_tokens the
// shape's per input.
func (m *mock) embeddings(w http.ResponseWriter, r *http.Request) {
	m.requests.Add(1)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req struct {
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
	}
	var inputs []json.RawMessage
	w.Header().Set("Content-Type", "application/json")
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Input) == 0 {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"invalid JSON body","type":"invalid_request_error"}}`)
		return
	}
	n := 1
	if req.Input[0] == '[' {
		if err := json.Unmarshal(req.Input, &inputs); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"input must be a string or an array","type":"invalid_request_error"}}`)
			return
		}
		n = len(inputs)
	}
	tokens := n * m.shape.Load().PromptTokens
	vec := m.embedding
	if req.EncodingFormat == "base64" {
		vec = m.embedding64
	}
	b := make([]byte, 0, n*(len(vec)+48)+128)
	b = append(b, `{"object":"list","data":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = append(b, vec...)
		b = append(b, '}')
	}
	b = append(b, `],"model":"mock-embedding","usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, "}}"...)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (m *mock) chat(w http.ResponseWriter, r *http.Request) {
	m.requests.Add(1)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"invalid JSON body","type":"invalid_request_error"}}`)
		return
	}
	s := m.shape.Load()
	if s.Latency > 0 {
		if !sleep(r.Context(), s.Latency) {
			return
		}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
		_, _ = w.Write(s.body)
		return
	}
	f, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for i, fr := range s.frames {
		// The delay goes between content chunks: the role chunk and the
		// first token leave together, as a real server's first flush does.
		if i > 1 && s.ChunkDelay > 0 {
			if f != nil {
				f.Flush()
			}
			if !sleep(r.Context(), s.ChunkDelay) {
				return
			}
		}
		if _, err := w.Write(fr); err != nil {
			return
		}
	}
	if s.Usage && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		_, _ = w.Write(s.usageFrame)
	}
	_, _ = io.WriteString(w, done)
}

// setShape handles POST /_mock/shape: the query names the fields to change.
func (m *mock) setShape(w http.ResponseWriter, r *http.Request) {
	next := *m.shape.Load()
	next.frames = nil
	q := r.URL.Query()
	var err error
	dur := func(name string, dst *time.Duration) {
		if v := q.Get(name); v != "" && err == nil {
			*dst, err = time.ParseDuration(v)
		}
	}
	num := func(name string, dst *int) {
		if v := q.Get(name); v != "" && err == nil {
			*dst, err = strconv.Atoi(v)
		}
	}
	dur("latency", &next.Latency)
	dur("chunk_delay", &next.ChunkDelay)
	num("chunks", &next.Chunks)
	num("tokens_per_chunk", &next.TokensPerChunk)
	num("prompt_tokens", &next.PromptTokens)
	if err == nil {
		err = next.render()
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.shape.Store(&next)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&next)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("mock: ")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the bound address to this file once listening")
	s := &shape{}
	flag.DurationVar(&s.Latency, "latency", 0, "fixed delay before the response headers")
	flag.IntVar(&s.Chunks, "chunks", 16, "content chunks per streamed reply (also the non-streaming reply's length)")
	flag.DurationVar(&s.ChunkDelay, "chunk-delay", 0, "delay between streamed content chunks")
	flag.IntVar(&s.TokensPerChunk, "tokens-per-chunk", 1, "words of content per chunk")
	flag.IntVar(&s.PromptTokens, "prompt-tokens", 12, "prompt_tokens reported in usage")
	flag.BoolVar(&s.Usage, "usage", true, "report a usage block (in the body, and as the include_usage chunk of streams)")
	embedDims := flag.Int("embed-dims", 1536, "floats per embedding vector (text-embedding-3-small's 1,536)")
	h2c := flag.Bool("h2c", false, "serve unencrypted HTTP/2 (prior knowledge) beside HTTP/1.1")
	flag.Parse()
	if err := s.render(); err != nil {
		log.Fatal(err)
	}
	if *embedDims < 1 {
		log.Fatal("embed-dims must be at least 1")
	}
	m := &mock{}
	m.embedding, m.embedding64 = renderEmbedding(*embedDims)
	m.shape.Store(s)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.chat)
	mux.HandleFunc("POST /v1/embeddings", m.embeddings)
	mux.HandleFunc("POST /_mock/shape", m.setShape)
	mux.HandleFunc("GET /_mock/stats", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "{\"requests\":%d}\n", m.requests.Load())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	// No WriteTimeout: it would cut long streams. Keep-alive connections
	// are the norm, so idle ones are kept for a while.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	if *h2c {
		// HTTP/2's defaults otherwise: 250 concurrent streams per
		// connection (a client opens another connection past that).
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("listening on %s", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
