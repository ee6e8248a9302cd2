package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
)

// rawCall is one hand-written HTTP/1.1 request on its own connection, so a
// test can send its body as slowly as it likes.
type rawCall struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, base string) *rawCall {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawCall{c: c, br: bufio.NewReader(c)}
}

// headers sends a POST's headers for a body of n bytes.
func (rc *rawCall) headers(t *testing.T, path, key string, n int) {
	t.Helper()
	h := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, n)
	if key != "" {
		h += "Authorization: Bearer " + key + "\r\n"
	}
	if _, err := io.WriteString(rc.c, h+"\r\n"); err != nil {
		t.Fatalf("write headers: %v", err)
	}
}

// response reads the response (within d) and reports whether the server
// then closed the connection.
func (rc *rawCall) response(t *testing.T, d time.Duration) (resp *http.Response, closed bool) {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A closing server sends its FIN right after the reply.
	_ = rc.c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = rc.br.ReadByte()
	return resp, errors.Is(err, io.EOF)
}

// trickle writes body in pieces of n bytes every gap, until it is all sent
// or the server stops reading.
func (rc *rawCall) trickle(body string, n int, gap time.Duration) {
	for len(body) > 0 {
		k := min(n, len(body))
		if _, err := io.WriteString(rc.c, body[:k]); err != nil {
			return
		}
		body = body[k:]
		time.Sleep(gap)
	}
}

func withBodyTimeout(d time.Duration, rate int64) gatewayOption {
	return func(o *Options) { o.BodyTimeout, o.BodyMinRate = d, rate }
}

// sizedChatBody is a valid chat-completions body of about n bytes.
func sizedChatBody(n int) string {
	pre, post := `{"model":"svc-fusion","max_tokens":5,"messages":[{"role":"user","content":"`, `"}]}`
	return pre + strings.Repeat("a", max(n-len(pre)-len(post), 1)) + post
}

func TestSlowBody_UnauthenticatedIsRefusedBeforeItsBodyArrives(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t, withBodyTimeout(time.Minute, 1024))
	for _, key := range []string{"", "llm_live_notakey"} {
		rc := dialRaw(t, gw.URL)
		start := time.Now()
		rc.headers(t, "/svc/v1/chat/completions", key, 100000)
		_, _ = io.WriteString(rc.c, `{"mo`) // then nothing more
		resp, closed := rc.response(t, 5*time.Second)
		is.Equal(resp.StatusCode, http.StatusUnauthorized) // refused on its headers
		is.True(closed)                                    // and the connection is let go
		is.True(time.Since(start) < 3*time.Second)         // without waiting for the body (a minute here)
		is.True(resp.Close)                                // the caller is told (Connection: close)
	}
}

func TestSlowBody_TrickleIsCutAtTheMinimumRate(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t, withBodyTimeout(300*time.Millisecond, 1000))
	rc := dialRaw(t, gw.URL)
	body := sizedChatBody(10000)
	start := time.Now()
	rc.headers(t, "/svc/v1/chat/completions", gw.Key, len(body))
	go rc.trickle(body, 10, 100*time.Millisecond) // 100 bytes/s: 100 s for the whole body
	resp, closed := rc.response(t, 5*time.Second)
	is.Equal(resp.StatusCode, http.StatusGatewayTimeout) // the body timed out
	is.True(closed)
	is.True(time.Since(start) < 3*time.Second)
}

func TestSlowBody_PauseLongerThanTheTimeoutIsCut(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t, withBodyTimeout(300*time.Millisecond, 1000))
	rc := dialRaw(t, gw.URL)
	body := sizedChatBody(20000)
	rc.headers(t, "/svc/v1/chat/completions", gw.Key, len(body))
	_, _ = io.WriteString(rc.c, body[:15000]) // well ahead of the rate...
	time.Sleep(800 * time.Millisecond)        // ...then a pause past the timeout
	_, _ = io.WriteString(rc.c, body[15000:])
	resp, closed := rc.response(t, 5*time.Second)
	is.Equal(resp.StatusCode, http.StatusGatewayTimeout)
	is.True(closed)
}

func TestSlowBody_LargeBodyOnASlowLinkGetsThrough(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t, withBodyTimeout(time.Second, 1000))
	rc := dialRaw(t, gw.URL)
	body := sizedChatBody(512 << 10)
	rc.headers(t, "/svc/v1/chat/completions", gw.Key, len(body))
	start := time.Now()
	go rc.trickle(body, 16<<10, 100*time.Millisecond) // ~160 KiB/s, 3.2 s: three times the timeout
	resp, closed := rc.response(t, 20*time.Second)
	is.Equal(resp.StatusCode, http.StatusOK) // never cut while it keeps arriving
	is.True(!closed)                         // and the connection stays open for the next call
	is.True(time.Since(start) > 3*time.Second)
}

// serveGateway runs the gateway under Serve (the production server, with
// its connection cap and timeouts) on a counting listener.
func serveGateway(t *testing.T, gw *testGateway, o ServeOptions) (base string, ln *countingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ln = &countingListener{Listener: l}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o.Logger = slog.New(slog.DiscardHandler)
	go func() { done <- Serve(ctx, ln, gw.Server, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + l.Addr().String(), ln
}

// countingListener counts the connections the server holds open, and the
// most it ever held.
type countingListener struct {
	net.Listener
	open, peak atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

func TestServe_IdleKeepAliveIsClosed(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	base, _ := serveGateway(t, gw, ServeOptions{IdleTimeout: 200 * time.Millisecond})
	rc := dialRaw(t, base)
	_, _ = io.WriteString(rc.c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(rc.br, nil)
	is.NoErr(err)
	_, _ = io.Copy(io.Discard, resp.Body)
	is.Equal(resp.StatusCode, http.StatusOK)
	start := time.Now()
	_, err = rc.br.ReadByte() // nothing more is sent: the server closes the idle connection
	is.True(errors.Is(err, io.EOF))
	is.True(time.Since(start) < 2*time.Second)
}

// An attacker opens far more connections than the cap, trickling headers
// or bodies, and reopens each as soon as it is cut; a normal client keeps
// getting answers, and the server never holds more connections than the
// cap (so it never runs out of file descriptors).
func TestServe_ConnectionCapHoldsAgainstExhaustion(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t, withBodyTimeout(300*time.Millisecond, 1000))
	const maxConns = 16
	base, ln := serveGateway(t, gw, ServeOptions{MaxConns: maxConns, HeaderTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(base, "http://")

	// The normal client: connected before the attack, calling back to back.
	client := &http.Client{Timeout: 15 * time.Second}
	normalCall := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/svc/v1/chat/completions",
			strings.NewReader(`{"model":"svc-fusion","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+gw.Key)
		return client.Do(req)
	}
	resp, err := normalCall()
	is.NoErr(err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	ctx, stop := context.WithCancel(context.Background())
	var attackers sync.WaitGroup
	var opened atomic.Int64
	for i := range 6 * maxConns {
		attackers.Add(1)
		go func() {
			defer attackers.Done()
			for ctx.Err() == nil {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				opened.Add(1)
				var req string
				switch i % 3 {
				case 0: // slow headers
					req = "POST /svc/v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
				case 1: // slow body, no key
					req = "POST /svc/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 100000\r\n\r\n{"
				default: // slow body with a key
					req = "POST /svc/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + gw.Key + "\r\nContent-Length: 100000\r\n\r\n{"
				}
				_, _ = io.WriteString(c, req)
				for ctx.Err() == nil { // one byte every 100 ms until cut
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Write([]byte("x")); err != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				c.Close()
			}
		}()
	}

	deadline := time.Now().Add(2 * time.Second)
	answered := 0
	for time.Now().Before(deadline) {
		resp, err := normalCall()
		is.NoErr(err) // the normal client is always answered
		if err != nil {
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusOK)
		answered++
	}
	// A caller that needs a new connection waits in the backlog behind the
	// attack's, which are cut one by one: it is answered too.
	var fresh []time.Duration
	for range 2 {
		start := time.Now()
		c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get(base + "/healthz")
		is.NoErr(err) // a new connection is answered
		if err != nil {
			break
		}
		resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusOK)
		fresh = append(fresh, time.Since(start))
	}
	stop()
	attackers.Wait()
	t.Logf("normal calls answered: %d; new connections answered after %v; attack connections opened: %d; peak held: %d",
		answered, fresh, opened.Load(), ln.peak.Load())
	is.True(answered >= 3)              // it kept getting answers
	is.True(opened.Load() > 2*maxConns) // the attack went well past the cap
	is.True(ln.peak.Load() <= maxConns) // the server never held more than the cap
	resp, err = client.Get(base + "/healthz")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
}

func TestDefaultMaxConns_FitsTheFileLimit(t *testing.T) {
	is := is.New(t)
	for _, tt := range []struct {
		nofile uint64
		want   int
	}{
		{256, 64}, {1024, 384}, {4096, 1920}, {20000, 9872}, {1 << 20, 65536}, {1<<64 - 1, 65536},
	} {
		got := maxConnsFor(tt.nofile)
		is.Equal(got, tt.want)
		if tt.nofile > 1024 {
			is.True(uint64(2*got+fdReserve) <= tt.nofile) // a caller and an upstream connection each, and the reserve
		}
	}
	is.True(DefaultMaxConns() >= 64)
}
