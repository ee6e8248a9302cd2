package protocol

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// Sizes that bound what an upstream can make us hold in memory.
const (
	// MaxEventSize caps one upstream SSE event. Gemini sends a function
	// call's arguments whole in one event, so this is generous.
	MaxEventSize = 16 << 20
	// maxBodySize caps a non-streaming reply.
	maxBodySize = 64 << 20
	// maxErrorBody is how much of an error body is read.
	maxErrorBody = 64 << 10
)

// sharedTransport is the transport of backends without an
// HTTPOptions.Client, created on first use; sharedH2CTransport that of
// those with HTTPOptions.H2C.
var (
	sharedTransport    = sync.OnceValue(newTransport)
	sharedH2CTransport = sync.OnceValue(newH2CTransport)
)

// newH2CTransport is newTransport speaking only unencrypted HTTP/2 with
// prior knowledge: an http:// request opens no HTTP/1.1 connection and
// no upgrade, and many streams share one connection (more open when the
// server's concurrent-stream limit is reached). Over HTTP/1.1 each
// stream holds a connection, its two buffers and the transport's read
// and write goroutines; over HTTP/2 a stream holds only its own state.
func newH2CTransport() *http.Transport {
	t := newTransport()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	t.Protocols = &p
	// Without a bound, calls that start together before the first
	// connection is up each dial one of their own (20 at once opened 10).
	// For HTTP/2 this bounds only the dials under way to a host, not the
	// connections: one more opens when the server's limit of concurrent
	// streams is reached.
	t.MaxConnsPerHost = 1
	// Prior knowledge cannot go through an HTTP proxy: an h2c upstream is
	// a server of one's own, reached directly.
	t.Proxy = nil
	// One connection carries every stream, so one that goes silent (a
	// peer gone without a reset) is noticed by a ping after 30 s rather
	// than by each stream's own timeout.
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 30 * time.Second}
	return t
}

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
		// request goes out as its headers and one write of its body; a
		// stream's reader waits in a read of one byte, then asks for the
		// rest of what came (up to sseBufferSize, 1 KiB, or 8 KiB in a
		// burst), and a read as large as the buffer bypasses it; a reply
		// answered whole is read into a buffer of its Content-Length.
		// Headers longer than the buffer (a vendor's can reach 1.5 KiB)
		// take one more read of the connection.
		WriteBufferSize: 1 << 10,
		ReadBufferSize:  1 << 10,
	}
}

// Client is what the protocol backends share: options, the client, and
// the call machinery.
type Client struct {
	Opts   upstream.HTTPOptions
	client *http.Client
	// rt is the client's transport, called directly: http.Client.Do
	// copies every request's headers for redirects (1-2% of a call's
	// CPU), and an upstream's redirect is never followed (see Post). nil
	// when the client has a cookie jar or an overall timeout, which only
	// Do applies.
	rt http.RoundTripper
	// vendorError refines the mapping of an error reply (see
	// upstream.ErrorFromStatus).
	vendorError func(status int, body []byte) upstream.ErrorHint
	// lastURL is the URL last posted to, parsed (nil: parse every time).
	lastURL *atomic.Pointer[parsedURL]
	// firstByte and idle are the causes the call timers cancel with,
	// shared by the calls (an error is only read); nil: made per call.
	firstByte, idle *timeoutError
}

// timeout is the cause of a timeout of phase after d: shared, when the
// client made one for that phase and d.
func timeout(shared *timeoutError, phase string, d time.Duration) *timeoutError {
	if shared != nil && shared.phase == phase && shared.after == d {
		return shared
	}
	return &timeoutError{phase: phase, after: d}
}

// parsedURL is a request URL and its parse.
type parsedURL struct {
	raw string
	u   *url.URL
}

// requestURL returns raw parsed as http.NewRequest has it (an empty port
// dropped from the host), as a URL of the caller's own: a backend posts to
// one URL (or a few), and parsing it took ~1% of a call's CPU.
func (h *Client) requestURL(raw string) (*url.URL, error) {
	if h.lastURL != nil {
		if p := h.lastURL.Load(); p != nil && p.raw == raw {
			u := *p.u
			return &u, nil
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	u.Host = strings.TrimSuffix(u.Host, ":") // as NewRequest does
	if h.lastURL != nil {
		c := *u
		h.lastURL.Store(&parsedURL{raw: raw, u: &c})
	}
	return u, nil
}

// NewClient returns the client of a protocol backend: BaseURL without a
// trailing slash, defaultBase when empty, and the shared transport when
// o.Client is nil. vendorError reads what an error body says beyond its
// status.
func NewClient(o upstream.HTTPOptions, defaultBase string, vendorError func(int, []byte) upstream.ErrorHint) Client {
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.BaseURL == "" {
		o.BaseURL = defaultBase
	}
	c := o.Client
	switch {
	case c != nil:
	case o.H2C:
		c = &http.Client{Transport: sharedH2CTransport()}
	default:
		c = &http.Client{Transport: sharedTransport()}
	}
	var rt http.RoundTripper
	if c.Jar == nil && c.Timeout == 0 {
		rt = cmp.Or[http.RoundTripper](c.Transport, http.DefaultTransport)
	} else {
		cc := *c // Do's path follows no redirect either
		cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		c = &cc
	}
	return Client{Opts: o, client: c, rt: rt, vendorError: vendorError, lastURL: new(atomic.Pointer[parsedURL]),
		firstByte: &timeoutError{phase: "first byte", after: o.FirstByteTimeout},
		idle:      &timeoutError{phase: "idle", after: o.IdleTimeout}}
}

// MaxTokens is the output cap to send: the caller's, never above the
// model's limit; def when the caller gave none.
func (h *Client) MaxTokens(req *llm.Request, def int) int {
	n := req.MaxTokens
	if n <= 0 {
		n = def
	}
	if lim := h.Opts.Limits.MaxCompletionTokens; lim > 0 && n > lim {
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

// Call is one HTTP exchange with an upstream: its own context, cancelled
// with a *timeoutError cause by the connect, first-byte and idle timers, or
// by Release.
type Call struct {
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelCauseFunc
	idle    time.Duration
	idleErr *timeoutError // the idle timer's cause

	timer *time.Timer
	// cause is what the timer cancels with: first-byte, then idle.
	cause atomic.Pointer[timeoutError]

	connMu    sync.Mutex
	connTimer *time.Timer

	// The request's body and trace live as long as the call does: one
	// allocation for the three.
	body  requestBody
	trace httptrace.ClientTrace
}

// Headers are a backend's request headers, built once by Client.Headers:
// one for calls answered whole and one for streams.
type Headers struct{ Call, Stream http.Header }

// Headers builds a backend's request headers once from base, the
// protocol's own part of a call's or a stream's header (made afresh for
// each), adding what every request to the upstream carries: Content-Type,
// User-Agent, Accept-Encoding and the configured headers (which override
// the others). Post sends a header as it is, and calls share it, as the
// transport only reads a request's header (one map and its values less a
// call).
//
// Accept-Encoding: gzip is what the transport would add to each request
// itself, in a header map of the request's own (~0.75 KB a call: the
// map and its value); asked for here, the transport leaves the reply
// compressed and Post decompresses it (gunzip) as the transport would.
func (h *Client) Headers(base func(stream bool) http.Header) Headers {
	complete := func(hd http.Header) http.Header {
		if hd == nil {
			hd = http.Header{}
		}
		hd["Content-Type"] = contentTypeJSON
		hd["User-Agent"] = userAgent
		hd["Accept-Encoding"] = acceptGzip
		for k, v := range h.Opts.Headers {
			hd.Set(k, v)
		}
		return hd
	}
	return Headers{Call: complete(base(false)), Stream: complete(base(true))}
}

// Post sends body to url with header, which it does not change (see
// Headers; the traceparent of a traced attempt, upstream.Traceparent, goes
// on a copy). It returns once the response headers have come with a 2xx
// status; any other status is read and mapped to an *llm.Error. The
// caller must call c.Release when done with the response.
//
// A redirect is not followed: a 3xx is an upstream failure like any other
// status (upstream.ErrorFromStatus), which the operator's log reports with
// its Location. An inference endpoint that moved is a base_url to correct,
// not a hop to make on every call, with the caller's conversation and the
// upstream's key sent to wherever the reply points.
func (h *Client) Post(ctx context.Context, url string, header http.Header, body []byte) (*Call, *http.Response, error) {
	c := &Call{parent: ctx, idle: h.Opts.IdleTimeout}
	c.idleErr = timeout(h.idle, "idle", c.idle)
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	if d := h.Opts.FirstByteTimeout; d > 0 {
		c.cause.Store(timeout(h.firstByte, "first byte", d))
		c.timer = time.AfterFunc(d, c.fire)
	}
	if tp := upstream.Traceparent(ctx); tp != "" {
		header = withTraceparent(header, tp)
	}
	rb := &c.body
	rb.b = body
	trace := &c.trace
	trace.WroteRequest = rb.wroteRequest
	if d := h.Opts.ConnectTimeout; d > 0 {
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
	u, err := h.requestURL(url)
	if err != nil {
		c.Release()
		return nil, nil, &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: fmt.Errorf("build upstream request: %w", err)}
	}
	defer rb.release()
	// The request as NewRequestWithContext makes it for a *bytes.Reader
	// body, without what it would allocate only for this to replace: the
	// URL it parses, the header map, the GetBody closure. The literal stays
	// on the stack: WithContext copies it.
	var rc io.ReadCloser = http.NoBody
	if r := rb.reader(); len(body) > 0 {
		// A NopCloser of a *bytes.Reader: the transport sends an in-memory
		// body with the headers in one write.
		rc = io.NopCloser(r)
	}
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          rc,
		GetBody:       rb.get,
		ContentLength: int64(len(body)),
		Host:          u.Host,
	}).WithContext(rctx)
	resp, err := h.send(req)
	if err != nil {
		err = c.fail(err, upstream.MsgUnreachable)
		c.Release()
		return nil, nil, err
	}
	gunzip(header, resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		c.Release()
		var hint upstream.ErrorHint
		if h.vendorError != nil {
			hint = h.vendorError(resp.StatusCode, b)
		}
		return nil, nil, upstream.ErrorFromStatus(resp.StatusCode, resp.Header, b, hint)
	}
	return c, resp, nil
}

// withTraceparent is header, shared by the backend's calls, copied with
// the attempt's W3C traceparent (upstream.Traceparent).
func withTraceparent(header http.Header, tp string) http.Header {
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h["Traceparent"] = []string{tp}
	return h
}

// send is one round trip of req, through the transport when the client
// allows (errors wrapped as Do wraps them: `Post "url": …`).
func (h *Client) send(req *http.Request) (*http.Response, error) {
	if h.rt == nil {
		return h.client.Do(req)
	}
	resp, err := h.rt.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: err}
	}
	return resp, nil
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
	// first and inline hold the first reader and the list, for the one
	// reader most calls need (two allocations a call fewer).
	first  bytes.Reader
	inline [1]*bytes.Reader
	// writes counts the transport's write attempts that are over, each
	// after its last read of its reader: one per reader, the original and
	// one per rewind (a request that nothing was written of is retried on
	// another connection with GetBody's).
	writes int
}

// reader returns a new reader of the body; nil once it is released.
func (rb *requestBody) reader() *bytes.Reader {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.released {
		return nil
	}
	var r *bytes.Reader
	if rb.readers == nil {
		r, rb.readers = &rb.first, rb.inline[:0]
		r.Reset(rb.b)
	} else {
		r = bytes.NewReader(rb.b)
	}
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

// wroteRequest is the request's httptrace WroteRequest hook, which the
// transport calls at the end of each attempt to write the request, written
// whole or failed: that attempt reads its body no more.
func (rb *requestBody) wroteRequest(httptrace.WroteRequestInfo) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.writes++
	rb.empty()
}

// release drops the bytes once the response has begun (or the call
// failed): GetBody can no longer rewind. The transport's readers are
// emptied by whichever comes last, release or the end of the last write:
// a response often arrives before the writer has reported the request
// written (the upstream answers as soon as it has read the body), and the
// writer may still be reading until then. Emptied at release only, the
// streams of BenchmarkOpenStreamMemory with a 48 KB prompt kept 11–19 KB
// each of it on average for as long as they streamed.
func (rb *requestBody) release() {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.b, rb.released = nil, true
	rb.empty()
}

// empty lets the transport's readers go of the bytes once the body is
// released and no write can still be reading one; rb.mu is held.
func (rb *requestBody) empty() {
	if !rb.released || rb.writes < len(rb.readers) {
		return
	}
	for _, r := range rb.readers {
		r.Reset(nil)
	}
	rb.readers = nil
}

// fire cancels the call with the current timer's cause.
func (c *Call) fire() { c.cancel(c.cause.Load()) }

// started switches the timer from the first-byte timeout to the idle one,
// restarting it; call it on every event.
func (c *Call) started() {
	if c.idle <= 0 {
		if c.timer != nil {
			c.timer.Stop()
		}
		return
	}
	if c.timer == nil {
		c.cause.Store(c.idleErr)
		c.timer = time.AfterFunc(c.idle, c.fire)
		return
	}
	if c.cause.Load().phase != "idle" {
		c.cause.Store(c.idleErr)
	}
	c.timer.Reset(c.idle)
}

// Release stops the timers and cancels the call's context.
func (c *Call) Release() {
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

var (
	contentTypeJSON = []string{"application/json"}
	userAgent       = []string{"svcgw"}
	acceptGzip      = []string{"gzip"}
)

// gunzip decompresses a reply to a request whose header asked for gzip
// alone, as the transport does when it asked for it itself (see Headers):
// the body read through a gzip reader made at the first read, its
// Content-Encoding and Content-Length dropped. The transport decompresses
// only what it asked for, so a request that asked for anything else gets
// its reply as it came, as before.
func gunzip(header http.Header, resp *http.Response) {
	ae := header["Accept-Encoding"]
	if len(ae) != 1 || ae[0] != "gzip" || resp.Uncompressed {
		return
	}
	ce := resp.Header["Content-Encoding"]
	if len(ce) == 0 || !strings.EqualFold(ce[0], "gzip") { // the transport reads the first
		return
	}
	resp.Body = &gzipBody{body: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
}

// gzipBody is a reply body read through gzip, as net/http's gzipReader:
// the gzip reader is made at the first read, so that a body closed unread
// reads nothing.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil {
		if g.err == nil {
			g.zr, g.err = gzip.NewReader(g.body)
		}
		if g.err != nil {
			return 0, g.err
		}
	}
	return g.zr.Read(p)
}

func (g *gzipBody) Close() error { return g.body.Close() }

// fail maps a transport or read error: one of the call's timeouts, the
// caller's own context (returned as is, so the server can tell a caller
// that left), or an upstream failure with the given caller-safe message.
func (c *Call) fail(err error, msg string) error {
	var te *timeoutError
	if errors.As(context.Cause(c.ctx), &te) {
		m := upstream.MsgTimeout
		if te.phase == "idle" {
			m = upstream.MsgStalled
		}
		return &llm.Error{Kind: llm.KindTimeout, Message: m, Err: te}
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if errors.Is(err, errEventTooLarge) {
		msg = upstream.MsgMalformed
	}
	return &llm.Error{Kind: llm.KindUpstream, Message: msg, Err: err}
}

// PostRead is a whole non-streaming exchange: Post, then the reply read
// with ReadBody, the call released. Its errors are Post's and ReadBody's.
func (h *Client) PostRead(ctx context.Context, url string, header http.Header, body []byte) ([]byte, error) {
	c, resp, err := h.Post(ctx, url, header, body)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	defer resp.Body.Close()
	return c.ReadBody(resp.Body, resp.ContentLength)
}

// ReadBody reads a whole non-streaming reply, restarting the idle timer on
// every read. size is the reply's Content-Length (-1 when unknown): the
// buffer is allocated at that size once instead of grown from 512 bytes.
func (c *Call) ReadBody(r io.Reader, size int64) ([]byte, error) {
	c.started()
	b, err := llm.ReadAllSized(io.LimitReader(&idleReader{r: r, c: c}, maxBodySize+1), size, maxBodySize)
	if err != nil {
		return nil, c.fail(err, upstream.MsgConnection)
	}
	if len(b) > maxBodySize {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: upstream.MsgMalformed, Err: errors.New("upstream reply too large")}
	}
	return b, nil
}

type idleReader struct {
	r io.Reader
	c *Call
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.c.started()
	}
	return n, err
}

// EncodeJSON marshals v without HTML escaping, so prompts go upstream as
// written.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: fmt.Errorf("encode upstream request: %w", err)}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
