//go:build bench

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is an OpenAI-compatible server answering as bench/mock does, and
// keeping what it was sent.
type upstream struct {
	*httptest.Server
	// hold, when set, is waited for after the first content chunk of a
	// stream has been flushed.
	hold chan struct{}

	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	auth string
	body map[string]any
}

const (
	upBody = `{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":"mock-model","system_fingerprint":"fp_backend",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"tok tok tok"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
	upUsageChunk = `{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
)

// upFrames are a stream's chunks before the usage chunk.
var upFrames = []string{
	`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":{"content":" tok tok"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, recorded{auth: r.Header.Get("Authorization"), body: body})
		u.mu.Unlock()
		if body["max_tokens"] == 500.0 { // a failing upstream, on request
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
			return
		}
		if body["stream"] != true {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, upBody)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, f := range upFrames {
			fmt.Fprintf(w, "data: %s\n\n", f)
			if i == 1 && u.hold != nil {
				w.(http.Flusher).Flush()
				select {
				case <-u.hold:
				case <-r.Context().Done():
					return
				}
			}
		}
		if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
			fmt.Fprintf(w, "data: %s\n\n", upUsageChunk)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last(t *testing.T) recorded {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("the upstream was not called")
	}
	return u.reqs[len(u.reqs)-1]
}

// lockedBuffer collects the program's log from its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const callerKey = "llm_live_floor-test"

// startFloor runs the program against up in mode and returns its base URL.
// It is stopped, and must exit cleanly, when the test ends.
func startFloor(t *testing.T, up *upstream, mode string, flags ...string) string {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	ctx, cancel := context.WithCancel(context.Background())
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-mode", mode, "-addr-file", addrFile, "-upstream", up.URL,
			"-upstream-key", "up-key", "-key", "other-key", "-key", callerKey}, flags...), &logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("floor exited with %v; log:\n%s", err, logs.String())
			}
		case <-time.After(5 * time.Second):
			t.Errorf("floor did not stop; log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return "http://" + string(b)
		}
		select {
		case err := <-done:
			t.Fatalf("floor exited at start: %v; log:\n%s", err, logs.String())
		default:
		}
	}
	t.Fatalf("floor wrote no address; log:\n%s", logs.String())
	return ""
}

func post(t *testing.T, base, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readJSON(t *testing.T, r io.Reader) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.NewDecoder(r).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// meter reads GET /_floor/usage.
func meter(t *testing.T, base string) map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/_floor/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return readJSON(t, resp.Body)
}

// sseData returns the data: payloads of a stream, in order.
func sseData(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	chatBody = `{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello."}],"max_tokens":64}`
	sseBody  = `{"model":"svc-fusion","messages":[{"role":"user","content":[{"type":"text","text":"Say hello."}]}],"max_tokens":64,"stream":true}`
)

func TestJSON_Completion(t *testing.T) {
	up := newUpstream(t)
	base := startFloor(t, up, "json")

	resp := post(t, base, callerKey, chatBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := readJSON(t, resp.Body)
	if got["model"] != "svc-fusion" {
		t.Errorf("model %v, want the caller's svc-fusion", got["model"])
	}
	if _, ok := got["system_fingerprint"]; ok {
		t.Errorf("the upstream's system_fingerprint reached the caller: %v", got)
	}
	choice := got["choices"].([]any)[0].(map[string]any)
	if msg := choice["message"].(map[string]any); msg["content"] != "tok tok tok" || msg["role"] != "assistant" || choice["finish_reason"] != "stop" {
		t.Errorf("choice %v", choice)
	}
	if u := got["usage"].(map[string]any); u["prompt_tokens"] != 12.0 || u["completion_tokens"] != 3.0 {
		t.Errorf("usage %v", u)
	}

	sent := up.last(t)
	if sent.auth != "Bearer up-key" {
		t.Errorf("upstream Authorization %q, want the upstream's key", sent.auth)
	}
	if sent.body["model"] != "mock-model" || sent.body["max_tokens"] != 64.0 || sent.body["stream"] != nil {
		t.Errorf("upstream request %v", sent.body)
	}
	if msgs := sent.body["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "Say hello." {
		t.Errorf("upstream messages %v", msgs)
	}
	if m := meter(t, base); m["calls"] != 1.0 || m["prompt_tokens"] != 12.0 || m["completion_tokens"] != 3.0 {
		t.Errorf("meter %v, want 1 call, 12 + 3 tokens", m)
	}
}

func TestJSON_Stream(t *testing.T) {
	for _, callerUsage := range []bool{false, true} {
		t.Run(fmt.Sprintf("include_usage=%v", callerUsage), func(t *testing.T) {
			up := newUpstream(t)
			base := startFloor(t, up, "json")
			body := sseBody
			if callerUsage {
				body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
			}
			resp := post(t, base, callerKey, body)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			data := sseData(t, resp.Body)
			want := len(upFrames) + 1 // and [DONE]
			if callerUsage {
				want++
			}
			if len(data) != want || data[len(data)-1] != "[DONE]" {
				t.Fatalf("%d frames, want %d ending in [DONE]: %q", len(data), want, data)
			}
			var text strings.Builder
			for i, d := range data[:len(data)-1] {
				var c map[string]any
				if err := json.Unmarshal([]byte(d), &c); err != nil {
					t.Fatalf("frame %d: %v: %s", i, err, d)
				}
				if c["model"] != "svc-fusion" || c["object"] != "chat.completion.chunk" {
					t.Errorf("frame %d: %s", i, d)
				}
				choices := c["choices"].([]any)
				if len(choices) == 0 {
					if i != len(upFrames) || c["usage"].(map[string]any)["completion_tokens"] != 3.0 {
						t.Errorf("frame %d: %s", i, d)
					}
					continue
				}
				if s, ok := choices[0].(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
					text.WriteString(s)
				}
			}
			if text.String() != "tok tok tok" {
				t.Errorf("streamed text %q", text.String())
			}
			// The caller's parts are relayed as they came, and usage is
			// asked for whether the caller asked or not: every stream is
			// metered.
			sent := up.last(t)
			if so, _ := sent.body["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("upstream request %v: no include_usage", sent.body)
			}
			if parts := sent.body["messages"].([]any)[0].(map[string]any)["content"].([]any); len(parts) != 1 || parts[0].(map[string]any)["text"] != "Say hello." {
				t.Errorf("upstream content parts %v", parts)
			}
			if m := meter(t, base); m["calls"] != 1.0 || m["prompt_tokens"] != 12.0 || m["completion_tokens"] != 3.0 {
				t.Errorf("meter %v, want 1 call, 12 + 3 tokens", m)
			}
		})
	}
}

// A frame is flushed to the caller while the upstream waits before its next.
func TestJSON_StreamFlushes(t *testing.T) {
	for _, mode := range []string{"json", "copy"} {
		t.Run(mode, func(t *testing.T) {
			up := newUpstream(t)
			up.hold = make(chan struct{})
			base := startFloor(t, up, mode)
			// Let the upstream go on when the test ends early, so that
			// everything stops.
			release := sync.OnceFunc(func() { close(up.hold) })
			t.Cleanup(release)
			// The call is made and read beside the test: without a flush
			// not even the response headers would arrive.
			type result struct {
				seen string
				body io.ReadCloser
				br   *bufio.Reader
				err  error
			}
			got := make(chan result, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(sseBody))
				req.Header.Set("Authorization", "Bearer "+callerKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- result{err: err}
					return
				}
				br := bufio.NewReader(resp.Body)
				var seen strings.Builder
				for {
					line, err := br.ReadString('\n')
					seen.WriteString(line)
					if err != nil || strings.Contains(line, `"content":"tok"`) {
						got <- result{seen: seen.String(), body: resp.Body, br: br, err: err}
						return
					}
				}
			}()
			var r result
			select {
			case r = <-got:
				if r.body != nil {
					defer r.body.Close()
				}
				if r.err != nil {
					t.Fatalf("%v after %q", r.err, r.seen)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the first token did not reach the caller while the upstream waited")
			}
			release()
			if rest, _ := io.ReadAll(r.br); !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
				t.Errorf("the stream's end: %q", rest)
			}
		})
	}
}

func TestCopy(t *testing.T) {
	for _, pool := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffer-pool=%v", pool), func(t *testing.T) {
			up := newUpstream(t)
			base := startFloor(t, up, "copy", fmt.Sprintf("-buffer-pool=%v", pool))

			// Twice: the second reuses the first's buffer when pooled.
			for range 2 {
				resp := post(t, base, callerKey, chatBody)
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || string(b) != upBody {
					t.Errorf("status %d, body %s; want the upstream's bytes", resp.StatusCode, b)
				}
			}
			if sent := up.last(t); sent.auth != "Bearer up-key" || sent.body["model"] != "svc-fusion" {
				t.Errorf("upstream got Authorization %q, body %v", sent.auth, sent.body)
			}

			resp := post(t, base, callerKey, sseBody)
			var want strings.Builder
			for _, f := range upFrames {
				fmt.Fprintf(&want, "data: %s\n\n", f)
			}
			want.WriteString("data: [DONE]\n\n")
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(b) != want.String() {
				t.Errorf("status %d, stream %q; want the upstream's bytes", resp.StatusCode, b)
			}
			if m := meter(t, base); m["calls"] != 3.0 {
				t.Errorf("meter %v, want 3 calls", m)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	for _, mode := range []string{"json", "copy"} {
		up := newUpstream(t)
		base := startFloor(t, up, mode)
		for _, key := range []string{"", "llm_live_unknown"} {
			resp := post(t, base, key, chatBody)
			e, _ := readJSON(t, resp.Body)["error"].(map[string]any)
			if resp.StatusCode != http.StatusUnauthorized || e["type"] != "invalid_api_key" {
				t.Errorf("%s, key %q: status %d, error %v", mode, key, resp.StatusCode, e)
			}
		}
		if m := meter(t, base); m["calls"] != 0.0 {
			t.Errorf("%s: meter %v after refused calls", mode, m)
		}
	}

	up := newUpstream(t)
	base := startFloor(t, up, "json")
	for _, c := range []struct {
		body   string
		status int
		typ    string
	}{
		{`{"model":`, http.StatusBadRequest, "invalid_request_error"},
		{`{"model":"m","messages":[]}`, http.StatusBadRequest, "invalid_request_error"},
		{`{"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest, "invalid_request_error"},
	} {
		resp := post(t, base, callerKey, c.body)
		e, _ := readJSON(t, resp.Body)["error"].(map[string]any)
		if resp.StatusCode != c.status || e["type"] != c.typ {
			t.Errorf("%s: status %d, error %v", c.body, resp.StatusCode, e)
		}
	}
	resp := post(t, base, callerKey, strings.Replace(chatBody, `"max_tokens":64`, `"max_tokens":500`, 1))
	if e, _ := readJSON(t, resp.Body)["error"].(map[string]any); resp.StatusCode != http.StatusBadGateway || e["type"] != "upstream_error" {
		t.Errorf("upstream error: status %d, error %v", resp.StatusCode, e)
	}
	if m := meter(t, base); m["calls"] != 0.0 {
		t.Errorf("meter %v after failed calls", m)
	}
	up.Close() // the upstream gone: 502
	resp = post(t, base, callerKey, chatBody)
	if e, _ := readJSON(t, resp.Body)["error"].(map[string]any); resp.StatusCode != http.StatusBadGateway || e["type"] != "upstream_error" {
		t.Errorf("upstream down: status %d, error %v", resp.StatusCode, e)
	}
}
