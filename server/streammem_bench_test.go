package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/openai"
)

// BenchmarkOpenStreamMemory is what one open stream holds in the gateway:
// a chat-completions stream relayed from an OpenAI-protocol upstream that
// has sent its first chunks and is thinking about the next. It opens
// openStreams streams, forces a GC, and reports the heap and goroutine
// stacks they hold. The same streams opened straight to the upstream are
// measured too and subtracted, so the figures are the gateway's alone:
// both sides of its two connections, its goroutines, and the call.
//
// The callers are raw TCP connections, which cost no goroutine of their
// own. The prompt sizes show that what an open stream holds does not grow
// with its conversation. The upstream speaks HTTP/1.1 and h2c on one port,
// and the gateway reaches it over either (HTTPOptions.H2C); with h2c the
// upstream's own side of the gateway's streams is HTTP/2's, and the direct
// streams subtracted are HTTP/1.1, so the h2c figures include the
// difference between the two on the upstream server's side as well.
func BenchmarkOpenStreamMemory(b *testing.B) {
	if os.Getenv("SVCGW_STREAMMEM_PROFILES") != "" {
		runtime.MemProfileRate = 1 // every allocation, so the profile accounts for each byte
	}
	for _, upProto := range []string{"http1", "h2c"} {
		for _, prompt := range []int{40, 48 << 10} {
			b.Run(fmt.Sprintf("upstream=%s/prompt=%dB", upProto, prompt), func(b *testing.B) {
				benchOpenStreams(b, prompt, upProto == "h2c")
			})
		}
	}
}

const openStreams = 200

// heldChunk is a chunk of streamingUpstream's streams.
const heldChunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]}` + "\n\n"

// streamingUpstream starts an upstream, over HTTP/1.1 and h2c, that answers
// every call with two chunks, flushed, and then lets hold decide the rest
// of the stream; it returns an openai backend to it (over h2c if h2c) and
// its URL.
func streamingUpstream(tb testing.TB, h2c bool, hold http.HandlerFunc) (*openai.Backend, string) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, heldChunk+heldChunk)
		w.(http.Flusher).Flush()
		hold(w, r)
	}))
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	up.Config.Protocols = &protocols
	up.Start()
	tb.Cleanup(up.Close)
	return openai.New(upstream.HTTPOptions{BaseURL: up.URL + "/v1", Model: "m", H2C: h2c,
		Limits: upstream.Limits{ContextLength: 1 << 20, MaxCompletionTokens: 16384}}), up.URL
}

func benchOpenStreams(b *testing.B, prompt int, h2c bool) {
	release := make(chan struct{})
	defer close(release)
	be, upURL := streamingUpstream(b, h2c, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	h, key, _ := benchGateway(b, upstream.NewRouter([]upstream.Candidate{{Name: "up", Backend: be, Limits: be.Limits()}}))
	gw := httptest.NewServer(h)
	defer gw.Close()

	body := `{"model":"svc-fusion","stream":true,"max_tokens":256,"messages":[{"role":"user","content":"` +
		strings.Repeat("x", prompt) + `"}]}`
	call := func(base, path string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, strings.TrimPrefix(base, "http://"), key, len(body), body)
	}
	// open starts n streams and returns once each has delivered content.
	open := func(base, path string, n int) []net.Conn {
		req := call(base, path)
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.WriteString(c, req); err != nil {
				b.Fatal(err)
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					b.Fatalf("%s: %v", base, err)
				}
				if strings.Contains(line, `"content":"tok"`) {
					break
				}
			}
			conns = append(conns, c)
		}
		return conns
	}
	held := func(base, path string) (heap, stack, goroutines float64) {
		for _, c := range open(base, path, 10) { // warm pools and caches
			c.Close()
		}
		h0, s0, g0 := memNow()
		if dir := os.Getenv("SVCGW_STREAMMEM_PROFILES"); dir != "" {
			writeHeapProfile(b, dir, b.Name()+"-"+path+"-before")
		}
		conns := open(base, path, openStreams)
		h1, s1, g1 := memNow()
		if dir := os.Getenv("SVCGW_STREAMMEM_PROFILES"); dir != "" {
			writeHeapProfile(b, dir, b.Name()+"-"+path)
		}
		for _, c := range conns {
			c.Close()
		}
		return (h1 - h0) / openStreams, (s1 - s0) / openStreams, (g1 - g0) / openStreams
	}

	var heap, stack, goroutines float64
	for b.Loop() {
		dh, ds, dg := held(upURL, "/v1/chat/completions")
		gh, gs, gg := held(gw.URL, "/svc/v1/chat/completions")
		heap, stack, goroutines = gh-dh, gs-ds, gg-dg
	}
	b.ReportMetric(heap, "heap-B/stream")
	b.ReportMetric(stack, "stack-B/stream")
	b.ReportMetric(goroutines, "goroutines/stream")
	b.ReportMetric(0, "ns/op") // suppressed: the time of a loop means nothing here
}

// writeHeapProfile writes the heap profile of the moment into dir, named
// after the benchmark and the path. SVCGW_STREAMMEM_PROFILES=dir asks for
// two per side (gateway, direct) of each sub-benchmark, recording every
// allocation: before its streams open ("-before") and while they are held,
// so that "go tool pprof -base BEFORE HELD" is what those streams hold.
func writeHeapProfile(b *testing.B, dir, name string) {
	f, err := os.Create(filepath.Join(dir, "heap-"+strings.NewReplacer("/", "_", "=", "-").Replace(name)+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// memNow is the live heap and the goroutine stacks in use, after a GC.
func memNow() (heap, stack, goroutines float64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc), float64(m.StackInuse), float64(runtime.NumGoroutine())
}
