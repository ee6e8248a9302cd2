package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcgw/svcgw/internal/logtext"
	"github.com/svcgw/svcgw/upstream"
)

// streamStackChild names, in the environment of a child process of the
// test binary, the upstream protocol TestStream_HandlerStackFitsEightKiB
// runs its streams over there.
const streamStackChild = "SVCGW_STREAMSTACK_CHILD"

// TestStream_HandlerStackFitsEightKiB holds the stack a stream's handler
// goroutine needs under 8 KiB for its whole life: decoding the request,
// opening the upstream call, writing the first header, relaying the
// chunks, metering the finish and writing the access line (see
// serveStream). Go doubles a goroutine's stack when a call does not fit
// and keeps it while a quarter of it is in use, so a single moment deeper
// than ~7.2 KB would make every open stream hold 16 KiB instead of 8.
//
// The streams run in a child process of the test binary with
// debug.SetMaxStack(8192) set after the gateway has served warm-up
// streams: a goroutine that would grow past 8 KiB kills it with the
// runtime's "goroutine stack exceeds 8192-byte limit" and the trace of
// where, which this test reports. The upstream is an OpenAI-compatible
// server over HTTP/1.1 and over h2c, as bench/run.sh's hold scenario.
//
// The race detector's instrumentation deepens every frame and doubles the
// stack guard, so under -race the test skips: scripts/test runs it
// without, on its own.
func TestStream_HandlerStackFitsEightKiB(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's frames are deeper: run without -race (scripts/test does)")
	}
	if child := os.Getenv(streamStackChild); child != "" {
		proto, sf, _ := strings.Cut(child, "/")
		streamsUnderStackLimit(t, proto == "h2c", stackSurfaces[sf])
		return
	}
	for _, proto := range []string{"http1", "h2c"} {
		for _, sf := range slices.Sorted(maps.Keys(stackSurfaces)) {
			t.Run("upstream="+proto+"/surface="+sf, func(t *testing.T) {
				t.Parallel()
				var out []byte
				var err error
				for try := 1; ; try++ {
					cmd := exec.Command(os.Args[0], "-test.run=^TestStream_HandlerStackFitsEightKiB$", "-test.count=1", "-test.v")
					cmd.Env = append(os.Environ(), streamStackChild+"="+proto+"/"+sf, "GOTRACEBACK=all")
					out, err = cmd.CombinedOutput()
					if err == nil || !inconclusive(out) || try == 3 {
						break
					}
					t.Logf("run %d overflowed outside the streams' own path; running again:\n%s", try, tail(out, 40))
				}
				if err != nil {
					t.Fatalf("the streams' child process failed (%v); its output:\n%s", err, tail(out, 120))
				}
				if !strings.Contains(string(out), "streams relayed under the stack limit") {
					t.Fatalf("the child process did not relay its streams; its output:\n%s", tail(out, 120))
				}
			})
		}
	}
}

// stackSurface is one surface's streaming call in
// TestStream_HandlerStackFitsEightKiB: its path, headers after the key's,
// body, and what a frame holding the upstream's "tok" looks like. The
// Responses surface is not one yet: its items are encoded by
// encoding/json, a map holding an item whose MarshalJSON marshals again,
// ~3.3 KB below the encoder's Event (bench/RESULTS.md, "The handler's
// stack at 8 KiB: per-stream memory").
type stackSurface struct {
	path, header, body, tok string
}

var stackSurfaces = map[string]stackSurface{
	"chat": {"/svc/v1/chat/completions", "Authorization: Bearer %s\r\n",
		`{"model":"svc-fusion","stream":true,"max_tokens":256,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say tok."}]}`,
		`"content":"tok"`},
	"messages": {"/svc/v1/messages", "x-api-key: %s\r\nanthropic-version: 2023-06-01\r\n",
		`{"model":"claude-x","stream":true,"max_tokens":256,"system":"Be brief.","messages":[{"role":"user","content":"Say tok."}]}`,
		`"text":"tok"`},
	"gencontent": {"/svc/v1beta/models/gemini-x:streamGenerateContent?alt=sse", "x-goog-api-key: %s\r\n",
		`{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":[{"role":"user","parts":[{"text":"Say tok."}]}],"generationConfig":{"maxOutputTokens":256}}`,
		`"text":"tok"`},
}

// inconclusive reports whether a child's stack overflow says nothing about
// the streams' path, and the child is run again (up to three times):
//   - when the goroutine that overflowed is not serving a request: the
//     stack limit is the process's, and the ledger's goroutine, preparing a
//     statement for a batch size it has not met before, goes deeper than
//     8 KiB (it is one goroutine, not one a stream);
//   - when it overflowed in the runtime's allocator refilling its cache
//     (mcache.refill, and below it the central lists and sweeping): a path
//     ~0.4–1 KB deeper than an allocation's usual one, which any allocation
//     takes now and then, at a moment no run can choose. A stream that
//     takes it holds a 16 KiB stack from then on, which at that rate costs
//     the hold nothing measurable.
//
// A moment of svcgw's own path past 8 KiB fails every run and is reported
// at once.
func inconclusive(out []byte) bool {
	_, report, ok := strings.Cut(string(out), "goroutine stack exceeds")
	if !ok {
		return false
	}
	_, running, _ := strings.Cut(report, "[running]:\n") // the overflowing goroutine's trace
	running, _, _ = strings.Cut(running, "\n\n")
	return !strings.Contains(running, "net/http.(*conn).serve(") || strings.Contains(running, "runtime.(*mcache).refill(")
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(string(out), "\n")
	if len(lines) > n {
		lines = lines[:n] // the stack overflow's report comes first; the other goroutines follow
	}
	return strings.Join(lines, "\n")
}

// streamsUnderStackLimit is the child's part: warm-up streams, then the
// stack limit, then three streams held open together and finished.
func streamsUnderStackLimit(t *testing.T, h2c bool, sf stackSurface) {
	const warmups = 3
	release := make(chan struct{})
	const end = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n" +
		"data: [DONE]\n\n"
	var calls atomic.Int32
	be, _ := streamingUpstream(t, h2c, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= warmups {
			_, _ = io.WriteString(w, heldChunk+end) // a warm-up: the whole stream at once
			return
		}
		select {
		case <-release:
			_, _ = io.WriteString(w, heldChunk+end)
		case <-r.Context().Done():
		}
	})
	gw := newTestGateway(t, func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "up", Backend: be, Limits: be.Limits()}})
		o.Logger = slog.New(logtext.NewHandler(io.Discard, nil)) // as serve logs
	})
	addr := strings.TrimPrefix(gw.URL, "http://")
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\n"+fmt.Sprintf(sf.header, gw.Key)+"Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		sf.path, addr, len(sf.body), sf.body)
	// open starts a stream and returns once it has relayed content.
	open := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if strings.Contains(line, sf.tok) {
				return c, br
			}
		}
	}
	// Warm-up streams, whole: the first use of some paths builds caches
	// (encoding/json's encoders of a type), once a process.
	for range warmups {
		c, br := open()
		_, _ = io.ReadAll(br)
		c.Close()
	}

	defer debug.SetMaxStack(debug.SetMaxStack(8192))
	type stream struct {
		c  net.Conn
		br *bufio.Reader
	}
	var held []stream
	for range 3 {
		c, br := open()
		held = append(held, stream{c, br})
	}
	close(release)
	for _, s := range held {
		rest, err := io.ReadAll(s.br)
		s.c.Close()
		if err != nil || !strings.Contains(string(rest), sf.tok) || !strings.HasSuffix(string(rest), "0\r\n\r\n") {
			t.Fatalf("the stream did not relay its last chunk and end (%v):\n%s", err, rest)
		}
	}
	// The access lines and the ledger's records are written after the
	// streams end: wait for the handlers to return.
	gw.Server.Wait()
	fmt.Println("streams relayed under the stack limit")
}
