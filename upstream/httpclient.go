package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// HTTPOptions configures a backend that speaks a vendor protocol over HTTP
// (NewOpenAI, NewAnthropic, NewGemini).
//
// Timeouts (zero means none):
//
//   - ConnectTimeout bounds getting a connection: dial and TLS handshake.
//   - FirstByteTimeout bounds the wait from sending the request to the
//     response headers and, for a stream, to its first event. A
//     non-streaming upstream sends its headers only once it has generated
//     the whole reply, so for Complete this is the longest reply accepted.
//   - IdleTimeout bounds every later gap: between two stream events (the
//     timer restarts on each event; SSE comments do not count), or between
//     two reads of a non-streaming body.
//
// A timeout fails the call with an llm.KindTimeout error. There is no
// overall deadline: the caller's context is one.
type HTTPOptions struct {
	// BaseURL is the vendor's base URL: for openai it includes /v1
	// (https://api.openai.com/v1, http://localhost:8000/v1); for anthropic
	// and gemini it does not (https://api.anthropic.com,
	// https://generativelanguage.googleapis.com). Empty means the vendor's
	// public API.
	BaseURL string
	// APIKey authenticates the gateway upstream; empty sends none (local
	// servers).
	APIKey string
	// Model is the backend model name sent upstream. It never reaches a
	// caller.
	Model string
	// Limits are the model's context length and max completion tokens.
	Limits Limits

	ConnectTimeout   time.Duration
	FirstByteTimeout time.Duration
	IdleTimeout      time.Duration

	// Client sends the requests; nil means a transport shared by every
	// backend that has none, tuned for many concurrent streams: HTTP/2
	// where the server offers it, up to 256 idle connections per host, and
	// no overall timeout (the timeouts above time each phase).
	Client *http.Client
	// Headers are extra request headers (for example OpenRouter's
	// HTTP-Referer and X-Title).
	Headers map[string]string

	// LegacyMaxTokens (openai protocol only) sends the output cap as
	// max_tokens instead of max_completion_tokens, for older
	// OpenAI-compatible servers that know only the former. OpenAI's own
	// reasoning models reject max_tokens.
	LegacyMaxTokens bool
	// PromptCacheKey (openai protocol only) sends every call a
	// prompt_cache_key derived from its account (and the caller's own
	// key), so that the upstream's cache routing never mixes tenants.
	// Servers that refuse unknown fields need it off.
	PromptCacheKey bool
}

// Sizes that bound what an upstream can make us hold in memory.
const (
	// maxEventSize caps one upstream SSE event. Gemini sends a function
	// call's arguments whole in one event, so this is generous.
	maxEventSize = 16 << 20
	// maxBodySize caps a non-streaming reply.
	maxBodySize = 64 << 20
	// maxErrorBody is how much of an error body is read, and errorLogBytes
	// how much of it is kept for operator logs.
	maxErrorBody  = 64 << 10
	errorLogBytes = 1 << 10
)

// sharedTransport is the transport of backends without an
// HTTPOptions.Client, created on first use.
var sharedTransport = sync.OnceValue(newTransport)

func newTransport() *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// An HTTP/1.1 connection holds both buffers as long as it lives,
		// through a whole stream: with 1,000 streams open the defaults
		// (4 KiB each) are 8 MiB. Smaller ones cost little here: a
		// request goes out as its headers and one write of its body, a
		// stream's reader asks for at most 1 KiB at a time (sse.go), and
		// a read of a whole reply larger than the buffer bypasses it.
		WriteBufferSize: 1 << 10,
		ReadBufferSize:  2 << 10,
	}
}

// httpClient is what the three backends share: options, the client, and
// the call machinery.
type httpClient struct {
	opts   HTTPOptions
	client *http.Client
	// vendorError refines the mapping of an error reply (see statusError).
	vendorError func(status int, body []byte) errorHint
}

func newHTTPClient(o HTTPOptions, defaultBase string, vendorError func(int, []byte) errorHint) httpClient {
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.BaseURL == "" {
		o.BaseURL = defaultBase
	}
	c := o.Client
	if c == nil {
		c = &http.Client{Transport: sharedTransport()}
	}
	return httpClient{opts: o, client: c, vendorError: vendorError}
}

// maxTokens is the output cap to send: the caller's, never above the
// model's limit; def when the caller gave none.
func (h *httpClient) maxTokens(req *llm.Request, def int) int {
	n := req.MaxTokens
	if n <= 0 {
		n = def
	}
	if lim := h.opts.Limits.MaxCompletionTokens; lim > 0 && n > lim {
		n = lim
	}
	return n
}

// timeoutError is the cause a call's context is cancelled with when one of
// its timers fires.
type timeoutError struct {
	phase string
	after time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("upstream %s timeout after %v", e.phase, e.after)
}

// call is one HTTP exchange with an upstream: its own context, cancelled
// with a *timeoutError cause by the connect, first-byte and idle timers, or
// by Close.
type call struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration

	timer *time.Timer
	// cause is what the timer cancels with: first-byte, then idle.
	cause atomic.Pointer[timeoutError]

	connMu    sync.Mutex
	connTimer *time.Timer
}

// post sends body to url. It returns once the response headers have come
// with a 2xx status; any other status is read and mapped to an *llm.Error.
// The caller must call c.release when done with the response.
func (h *httpClient) post(ctx context.Context, url string, header http.Header, body []byte) (*call, *http.Response, error) {
	c := &call{parent: ctx, idle: h.opts.IdleTimeout}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	if d := h.opts.FirstByteTimeout; d > 0 {
		c.cause.Store(&timeoutError{phase: "first byte", after: d})
		c.timer = time.AfterFunc(d, c.fire)
	}
	rb := &requestBody{b: body}
	trace := &httptrace.ClientTrace{WroteRequest: rb.wroteRequest}
	if d := h.opts.ConnectTimeout; d > 0 {
		trace.GetConn = func(string) {
			c.connMu.Lock()
			defer c.connMu.Unlock()
			if c.connTimer != nil {
				c.connTimer.Stop()
			}
			c.connTimer = time.AfterFunc(d, func() { c.cancel(&timeoutError{phase: "connect", after: d}) })
		}
		trace.GotConn = func(httptrace.GotConnInfo) {
			c.connMu.Lock()
			defer c.connMu.Unlock()
			if c.connTimer != nil {
				c.connTimer.Stop()
			}
		}
	}
	rctx := httptrace.WithClientTrace(c.ctx, trace)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, rb.reader())
	if err != nil {
		c.release()
		return nil, nil, &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: fmt.Errorf("build upstream request: %w", err)}
	}
	req.GetBody = rb.get
	defer rb.release()
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "svcgw")
	for k, v := range h.opts.Headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		err = c.fail(err, msgUnreachable)
		c.release()
		return nil, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		c.release()
		var hint errorHint
		if h.vendorError != nil {
			hint = h.vendorError(resp.StatusCode, b)
		}
		return nil, nil, statusError(resp.StatusCode, resp.Header, b, hint)
	}
	return c, resp, nil
}

// requestBody is an upstream request's body, which lets go of its bytes
// once they are sent. The transport holds the request until the response
// ends, a whole stream's length, but the body, often the whole
// conversation and the largest thing a call holds, is needed only until
// the response begins: the transport rewinds it (GetBody) only to resend
// the request on a new connection before that.
//
// The transport reads the body as a *bytes.Reader: for its in-memory body
// types it sends the headers and the body in one write, for any other
// reader in two.
type requestBody struct {
	mu       sync.Mutex
	b        []byte
	released bool
	readers  []*bytes.Reader // every reader handed to the transport
	// wrote is set by the transport's writer once it has written the
	// request whole, after its last read of the body.
	wrote atomic.Bool
}

// reader returns a new reader of the body; nil once it is released.
func (rb *requestBody) reader() *bytes.Reader {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.released {
		return nil
	}
	r := bytes.NewReader(rb.b)
	rb.readers = append(rb.readers, r)
	return r
}

// get is the request's GetBody.
func (rb *requestBody) get() (io.ReadCloser, error) {
	r := rb.reader()
	if r == nil {
		return nil, errors.New("upstream request body already released")
	}
	return io.NopCloser(r), nil
}

// wroteRequest is the request's httptrace WroteRequest hook.
func (rb *requestBody) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		rb.wrote.Store(true)
	}
}

// release drops the bytes once the response has begun (or the call
// failed): GetBody can no longer rewind, and once the transport has
// written the request whole its readers are emptied. A request answered
// before it was written whole keeps them, as its writer may still be
// reading.
func (rb *requestBody) release() {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.b, rb.released = nil, true
	if rb.wrote.Load() {
		for _, r := range rb.readers {
			r.Reset(nil)
		}
	}
	rb.readers = nil
}

// fire cancels the call with the current timer's cause.
func (c *call) fire() { c.cancel(c.cause.Load()) }

// started switches the timer from the first-byte timeout to the idle one,
// restarting it; call it on every event.
func (c *call) started() {
	if c.idle <= 0 {
		if c.timer != nil {
			c.timer.Stop()
		}
		return
	}
	if c.timer == nil {
		c.cause.Store(&timeoutError{phase: "idle", after: c.idle})
		c.timer = time.AfterFunc(c.idle, c.fire)
		return
	}
	if c.cause.Load().phase != "idle" {
		c.cause.Store(&timeoutError{phase: "idle", after: c.idle})
	}
	c.timer.Reset(c.idle)
}

// release stops the timers and cancels the call's context.
func (c *call) release() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.connMu.Lock()
	if c.connTimer != nil {
		c.connTimer.Stop()
	}
	c.connMu.Unlock()
	c.cancel(errCallDone)
}

var errCallDone = errors.New("upstream call finished")

// fail maps a transport or read error: one of the call's timeouts, the
// caller's own context (returned as is, so the server can tell a caller
// that left), or an upstream failure with the given caller-safe message.
func (c *call) fail(err error, msg string) error {
	var te *timeoutError
	if errors.As(context.Cause(c.ctx), &te) {
		m := msgTimeout
		if te.phase == "idle" {
			m = msgStalled
		}
		return &llm.Error{Kind: llm.KindTimeout, Message: m, Err: te}
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if errors.Is(err, errEventTooLarge) {
		msg = msgMalformed
	}
	return &llm.Error{Kind: llm.KindUpstream, Message: msg, Err: err}
}

// readBody reads a whole non-streaming reply, restarting the idle timer on
// every read.
func (c *call) readBody(r io.Reader) ([]byte, error) {
	c.started()
	b, err := io.ReadAll(io.LimitReader(&idleReader{r: r, c: c}, maxBodySize+1))
	if err != nil {
		return nil, c.fail(err, msgConnection)
	}
	if len(b) > maxBodySize {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: msgMalformed, Err: errors.New("upstream reply too large")}
	}
	return b, nil
}

type idleReader struct {
	r io.Reader
	c *call
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.c.started()
	}
	return n, err
}

// encodeJSON marshals v without HTML escaping, so prompts go upstream as
// written.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: fmt.Errorf("encode upstream request: %w", err)}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
