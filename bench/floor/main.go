//go:build bench

// Command floor is the least a gateway that honours svcgw's contract has to
// do on net/http (bench/README.md): the floor under svcgw that a JSON-reading
// gateway cannot go below, next to the bare proxy (bench/proxy), which only
// copies bytes.
//
// With -mode=json (the default) each POST /v1/chat/completions is
//
//   - authenticated: the bearer key looked up in an in-memory map;
//   - read and decoded (encoding/json) into the fields a translating gateway
//     must read: model, messages, stream, stream_options, max_tokens and the
//     sampling parameters, the structured ones kept as json.RawMessage;
//   - re-encoded as the upstream's request, with the route's model id in
//     place of the caller's and the usage chunk always asked for (the call
//     is metered even when the caller does not ask for it);
//   - sent with net/http's client to the upstream;
//   - answered from the decoded reply, re-encoded with the caller's model id
//     echoed: non-streaming, the whole JSON body; streaming, every SSE
//     data: line's chunk decoded and re-encoded, and flushed once nothing
//     more is buffered, as svcgw flushes;
//   - metered: the reply's token usage added to the key's in-memory counters
//     (GET /_floor/usage shows them). No database, no log line.
//
// With -mode=copy the same key check stands in front of an
// httputil.ReverseProxy configured as bench/proxy's: a check that the
// floor's server and routing add nothing to the proxy.
//
// It is a bench tool, not part of svcgw: it imports nothing of the module.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// keyList is the repeatable -key flag.
type keyList []string

func (k *keyList) String() string     { return strings.Join(*k, ",") }
func (k *keyList) Set(v string) error { *k = append(*k, v); return nil }

// run serves until ctx ends.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	logger := log.New(stderr, "floor: ", 0)
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	addrFile := fs.String("addr-file", "", "write the bound address to this file once listening")
	target := fs.String("upstream", "http://127.0.0.1:8081", "upstream base URL (the mock); calls go to its /v1/chat/completions")
	mode := fs.String("mode", "json", "json: decode, re-encode and meter every call; copy: a ReverseProxy behind the key check")
	model := fs.String("upstream-model", "mock-model", "the model id sent upstream (json mode)")
	upstreamKey := fs.String("upstream-key", "bench", "the upstream's bearer key")
	pprofFile := fs.String("pprof-addr-file", "", "serve net/http/pprof on another loopback port and write its address to this file")
	bufferPool := fs.Bool("buffer-pool", false, "copy mode: give the ReverseProxy a pool of copy buffers (bench/proxy has none, so it allocates 32 KiB a response)")
	var keys keyList
	fs.Var(&keys, "key", "a caller's bearer key (repeatable; at least one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("at least one -key is needed")
	}
	u, err := url.Parse(*target)
	if err != nil {
		return err
	}
	g := &gateway{
		keys:        make(map[string]*account, len(keys)),
		client:      &http.Client{Transport: newTransport()},
		upstreamURL: strings.TrimRight(u.String(), "/") + "/v1/chat/completions",
		upstreamKey: "Bearer " + *upstreamKey,
		model:       *model,
		log:         logger,
	}
	for _, k := range keys {
		g.keys[k] = &account{}
	}
	var chat http.Handler
	switch *mode {
	case "json":
		chat = http.HandlerFunc(g.chat)
	case "copy":
		chat = g.copyProxy(u, *bufferPool)
	default:
		return fmt.Errorf("unknown -mode %q (json or copy)", *mode)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", chat)
	mux.HandleFunc("GET /_floor/usage", g.usage)

	if *pprofFile != "" {
		if err := servePprof(ctx, *pprofFile); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			ln.Close()
			return err
		}
	}
	// No WriteTimeout: it would cut long streams.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: logger}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close() // streams still open after the grace period
		}
	}()
	logger.Printf("listening on %s, mode %s, forwarding to %s", ln.Addr(), *mode, u)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return nil
}

// newTransport is bench/proxy's transport: as many idle upstream
// connections as svcgw keeps.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
}

// servePprof serves net/http/pprof on a loopback port of its own until ctx
// ends, so that run.sh can fetch a CPU profile of a measured phase.
func servePprof(ctx context.Context, addrFile string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := os.WriteFile(addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}

// account is one key's meter.
type account struct {
	calls, promptTokens, completionTokens atomic.Int64
}

func (a *account) add(u *usage) {
	a.calls.Add(1)
	if u != nil {
		a.promptTokens.Add(u.PromptTokens)
		a.completionTokens.Add(u.CompletionTokens)
	}
}

type gateway struct {
	keys        map[string]*account // read-only once serving
	client      *http.Client
	upstreamURL string
	upstreamKey string // "Bearer …"
	model       string
	log         *log.Logger
}

// account returns the caller's account, or nil when the bearer key is
// missing or unknown.
func (g *gateway) account(r *http.Request) *account {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil
	}
	return g.keys[key]
}

// copyProxy is bench/proxy's ReverseProxy behind the key check; the
// caller's key is replaced by the upstream's. With pool, its copy buffers
// are reused instead of allocated for every response.
func (g *gateway) copyProxy(u *url.URL, pool bool) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = newTransport()
	rp.ErrorLog = g.log
	if pool {
		rp.BufferPool = &bufferPool{}
	}
	direct := rp.Director
	rp.Director = func(r *http.Request) {
		direct(r)
		r.Header.Set("Authorization", g.upstreamKey)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := g.account(r)
		if a == nil {
			writeError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
			return
		}
		a.calls.Add(1)
		rp.ServeHTTP(w, r)
	})
}

// bufferPool is a httputil.BufferPool of 32 KiB buffers, the size
// ReverseProxy allocates when it has none.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// The wire types: the parts of the OpenAI chat-completions format a
// translating gateway reads and writes. What it does not read or rewrite is
// kept as raw JSON.
type (
	chatRequest struct {
		Model               string          `json:"model"`
		Messages            []message       `json:"messages"`
		Stream              bool            `json:"stream,omitempty"`
		StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
		MaxTokens           *int            `json:"max_tokens,omitempty"`
		MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
		Temperature         *float64        `json:"temperature,omitempty"`
		TopP                *float64        `json:"top_p,omitempty"`
		Stop                json.RawMessage `json:"stop,omitempty"`
		Tools               json.RawMessage `json:"tools,omitempty"`
		ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
		ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	}
	message struct {
		Role string `json:"role"`
		// A string or an array of parts, relayed as it came.
		Content    json.RawMessage `json:"content,omitempty"`
		Name       string          `json:"name,omitempty"`
		ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
		ToolCallID string          `json:"tool_call_id,omitempty"`
	}
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	}
	completion struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
	}
	choice struct {
		Index        int     `json:"index"`
		Message      delta   `json:"message"`
		FinishReason *string `json:"finish_reason"`
	}
	chunk struct {
		ID      string        `json:"id"`
		Object  string        `json:"object"`
		Created int64         `json:"created"`
		Model   string        `json:"model"`
		Choices []chunkChoice `json:"choices"`
		Usage   *usage        `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	// delta is a reply's message, or a chunk's part of it.
	delta struct {
		Role      string          `json:"role,omitempty"`
		Content   *string         `json:"content,omitempty"`
		ToolCalls json.RawMessage `json:"tool_calls,omitempty"`
	}
)

// maxBody bounds a caller's request body and an upstream's reply.
const maxBody = 32 << 20

// chat serves POST /v1/chat/completions in json mode.
func (g *gateway) chat(w http.ResponseWriter, r *http.Request) {
	a := g.account(r)
	if a == nil {
		writeError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "The request body could not be read.")
		return
	}
	var req chatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "The request body is not valid JSON.")
		return
	}
	if req.Model == "" || len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "model and messages are required.")
		return
	}
	callerModel, callerUsage := req.Model, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	req.Model = g.model
	if req.Stream {
		req.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(&req)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "The upstream request could not be encoded.")
		return
	}
	up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, g.upstreamURL, bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "The upstream request could not be made.")
		return
	}
	up.Header.Set("Content-Type", "application/json")
	up.Header.Set("Authorization", g.upstreamKey)
	if req.Stream {
		up.Header.Set("Accept", "text/event-stream")
	}
	resp, err := g.client.Do(up)
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "The upstream could not be reached.")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		writeError(w, http.StatusBadGateway, "upstream_error", "The upstream answered "+resp.Status+".")
		return
	}
	if req.Stream {
		g.relayStream(w, resp.Body, a, callerModel, callerUsage)
		return
	}
	var reply completion
	if raw, err = io.ReadAll(io.LimitReader(resp.Body, maxBody)); err == nil {
		err = json.Unmarshal(raw, &reply)
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "The upstream's reply could not be read.")
		return
	}
	reply.Model = callerModel
	out, err := json.Marshal(&reply)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "The reply could not be encoded.")
		return
	}
	a.add(reply.Usage)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// relayStream re-encodes an upstream SSE stream to the caller: each data:
// line's chunk is decoded, its model replaced by the caller's and encoded
// again; the usage-only chunk is metered, and relayed only when the caller
// asked for it. Frames are flushed once no further line is buffered, so a
// burst goes out in one write and a frame followed by a wait goes out at
// once.
func (g *gateway) relayStream(w http.ResponseWriter, body io.Reader, a *account, model string, callerUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var (
		br      = bufio.NewReader(body)
		frame   bytes.Buffer
		enc     = json.NewEncoder(&frame)
		long    []byte // a line longer than br's buffer
		metered bool
	)
	defer func() {
		if !metered {
			a.add(nil) // a stream that ended without usage still counts as a call
		}
	}()
	pending := false // frames written and not yet flushed
	for {
		line, err := readLine(br, &long)
		if err != nil {
			// The upstream's end (after [DONE], as a rule), a broken
			// connection or an over-long line: the stream ends here.
			if !errors.Is(err, io.EOF) {
				g.log.Printf("upstream stream: %v", err)
			}
			if pending {
				_ = rc.Flush()
			}
			return
		}
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			// Other lines (blank ones, comments, event: and id:) carry
			// nothing to relay.
			data = bytes.TrimSpace(data)
			frame.Reset()
			if string(data) == "[DONE]" {
				frame.WriteString("data: [DONE]\n\n")
			} else {
				var c chunk
				if err := json.Unmarshal(data, &c); err != nil {
					g.log.Printf("upstream chunk: %v", err)
					return
				}
				if c.Usage != nil && !metered {
					metered = true
					a.add(c.Usage)
				}
				if len(c.Choices) > 0 || c.Usage == nil || callerUsage {
					c.Model = model
					frame.WriteString("data: ")
					if err := enc.Encode(&c); err != nil { // the JSON and "\n"
						g.log.Printf("stream chunk: %v", err)
						return
					}
					frame.WriteByte('\n')
				}
			}
			if frame.Len() > 0 {
				if _, err := w.Write(frame.Bytes()); err != nil {
					return // the caller left
				}
				pending = true
			}
		}
		if pending && !lineBuffered(br) {
			if err := rc.Flush(); err != nil {
				return
			}
			pending = false
		}
	}
}

// maxLine bounds an upstream stream's line (one chunk's JSON).
const maxLine = 8 << 20

// readLine returns the next line of br, valid until the next call. A line
// longer than br's buffer is gathered in *long.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	*long = append((*long)[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(*long) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		line, err = br.ReadSlice('\n')
		*long = append(*long, line...)
	}
	return *long, err
}

// lineBuffered reports whether a whole line is already buffered, so the
// next read will not wait for the network.
func lineBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := br.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// usage serves GET /_floor/usage: every key's meter, summed.
func (g *gateway) usage(w http.ResponseWriter, _ *http.Request) {
	var calls, prompt, completion int64
	for _, a := range g.keys {
		calls += a.calls.Load()
		prompt += a.promptTokens.Load()
		completion += a.completionTokens.Load()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion})
}

// writeError answers in OpenAI's error envelope.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
