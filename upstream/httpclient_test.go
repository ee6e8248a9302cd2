package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// vendor builds one protocol's backend against a fake upstream, and knows
// one event of its stream format.
type vendor struct {
	name  string
	new   func(o upstream.HTTPOptions) upstream.Backend
	base  string // appended to the fake's URL
	first string // the start of a stream, up to its first output event
}

var vendors = []vendor{
	{
		name:  "openai",
		new:   func(o upstream.HTTPOptions) upstream.Backend { return upstream.NewOpenAI(o) },
		base:  "/v1",
		first: "data: {\"id\":\"chatcmpl-canary\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
	},
	{
		name: "anthropic",
		new:  func(o upstream.HTTPOptions) upstream.Backend { return upstream.NewAnthropic(o) },
		first: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
	},
	{
		name:  "gemini",
		new:   func(o upstream.HTTPOptions) upstream.Backend { return upstream.NewGemini(o) },
		first: "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hi\"}]},\"index\":0}]}\n\n",
	},
}

func hiRequest() *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Hi")}}}}
}

// TestBackends_ErrorMapping checks that upstream error replies become
// caller-safe *llm.Error values of the right kind, with retry guidance and
// without the vendor's message, on Complete and on Stream.
func TestBackends_ErrorMapping(t *testing.T) {
	type row struct {
		name       string
		vendors    string // "" for all; else one vendor's name
		status     int
		header     map[string]string
		body       string
		kind       llm.Kind
		message    string
		retryAfter time.Duration
		retryable  bool
	}
	generic := `{"error":{"message":"canary-backend-model says no","type":"canary_error","code":"canary"}}`
	rows := []row{
		{name: "400 is the request's fault", status: 400, body: generic, kind: llm.KindInvalidRequest, message: "the upstream model rejected the request"},
		{name: "422 too", status: 422, body: generic, kind: llm.KindInvalidRequest, message: "the upstream model rejected the request"},
		{name: "401 is the gateway's credentials", status: 401, body: generic, kind: llm.KindUpstream, message: "the gateway's upstream credentials were rejected"},
		{name: "403 too", status: 403, body: generic, kind: llm.KindUpstream, message: "the gateway's upstream credentials were rejected"},
		{name: "404 model not available", status: 404, body: generic, kind: llm.KindUpstream, message: "the upstream model is not available"},
		{name: "408 timeout", status: 408, body: generic, kind: llm.KindTimeout, retryable: true, message: "the upstream model did not respond in time"},
		{name: "413 too large", status: 413, body: generic, kind: llm.KindTooLarge, message: "the request is too large for the upstream model"},
		{name: "429 with retry-after seconds", status: 429, header: map[string]string{"Retry-After": "7"}, body: generic, kind: llm.KindRateLimited, retryAfter: 7 * time.Second, retryable: true, message: "the upstream model is rate limited; retry later"},
		{name: "429 with retry-after-ms", status: 429, header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"}, body: generic, kind: llm.KindRateLimited, retryAfter: 1500 * time.Millisecond, retryable: true, message: "the upstream model is rate limited; retry later"},
		{name: "500", status: 500, body: "<html>canary proxy error</html>", kind: llm.KindUpstream, retryable: true, message: "the upstream model failed"},
		{name: "502", status: 502, body: generic, kind: llm.KindUpstream, retryable: true, message: "the upstream model failed"},
		{name: "503 overloaded", status: 503, header: map[string]string{"Retry-After": "3"}, body: generic, kind: llm.KindOverloaded, retryAfter: 3 * time.Second, retryable: true, message: "the upstream model is overloaded; retry later"},
		{name: "504 timeout", status: 504, body: generic, kind: llm.KindTimeout, retryable: true, message: "the upstream model did not respond in time"},
		{name: "529 overloaded", status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"canary Overloaded"}}`, kind: llm.KindOverloaded, retryable: true, message: "the upstream model is overloaded; retry later"},
		{name: "quota exhausted is not a rate limit", vendors: "openai", status: 429, body: `{"error":{"message":"canary quota","type":"insufficient_quota","code":"insufficient_quota"}}`, kind: llm.KindUpstream, message: "the gateway's upstream quota is exhausted"},
		{name: "context length exceeded", vendors: "openai", status: 400, body: `{"error":{"message":"canary-backend-model has 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`, kind: llm.KindInvalidRequest, message: "the request does not fit the model's context window"},
		{name: "prompt too long", vendors: "anthropic", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum (canary)"}}`, kind: llm.KindInvalidRequest, message: "the request does not fit the model's context window"},
		{name: "billing error", vendors: "anthropic", status: 400, body: `{"type":"error","error":{"type":"billing_error","message":"canary credit"}}`, kind: llm.KindUpstream, message: "the gateway's upstream quota is exhausted"},
		{name: "bad key is a 400 with API_KEY_INVALID", vendors: "gemini", status: 400, body: `{"error":{"code":400,"message":"API key not valid (canary)","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, kind: llm.KindUpstream, message: "the gateway's upstream credentials were rejected"},
		{name: "RetryInfo gives the delay", vendors: "gemini", status: 429, body: `{"error":{"code":429,"message":"canary quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`, kind: llm.KindRateLimited, retryAfter: 30 * time.Second, retryable: true, message: "the upstream model is rate limited; retry later"},
		{name: "error wrapped in an array", vendors: "gemini", status: 503, body: `[{"error":{"code":503,"message":"The model canary is overloaded.","status":"UNAVAILABLE"}}]`, kind: llm.KindOverloaded, retryable: true, message: "the upstream model is overloaded; retry later"},
	}
	for _, v := range vendors {
		for _, rw := range rows {
			if rw.vendors != "" && rw.vendors != v.name {
				continue
			}
			t.Run(v.name+" "+rw.name, func(t *testing.T) {
				f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					for k, val := range rw.header {
						w.Header().Set(k, val)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(rw.status)
					fmt.Fprint(w, rw.body)
				})
				b := v.new(options(f, v.base))
				for _, stream := range []bool{false, true} {
					is := is.New(t)
					req := hiRequest()
					req.Stream = stream
					var err error
					if stream {
						_, err = b.Stream(testCtx(t), req)
					} else {
						_, err = b.Complete(testCtx(t), req)
					}
					le := llmError(t, err)
					is.Equal(le.Kind, rw.kind)
					is.Equal(le.Message, rw.message)
					is.Equal(le.RetryAfter, rw.retryAfter)
					is.Equal(upstream.Retryable(err), rw.retryable)
					var se *upstream.StatusError
					is.True(errors.As(err, &se)) // the vendor's reply is kept for logs
					is.Equal(se.StatusCode, rw.status)
					noLeak(t, "error", le)
				}
			})
		}
	}
}

// TestBackends_StreamDisconnect checks that a caller leaving mid-stream
// cancels the upstream request.
func TestBackends_StreamDisconnect(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			is := is.New(t)
			gone := make(chan struct{})
			f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, v.first)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				close(gone)
			})
			ctx, cancel := context.WithCancel(testCtx(t))
			s, err := v.new(options(f, v.base)).Stream(ctx, hiRequest())
			is.NoErr(err) // stream
			defer s.Close()
			is.True(s.Next()) // the first event
			is.Equal(s.Event().Text, "Hi")
			cancel()
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
			is.True(!s.Next())
			is.True(errors.Is(s.Err(), context.Canceled)) // the caller's own cancellation
		})
	}
}

// TestBackends_CompleteDisconnect checks that a caller leaving cancels a
// non-streaming upstream request.
func TestBackends_CompleteDisconnect(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			is := is.New(t)
			gone := make(chan struct{})
			f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
				close(gone)
			})
			ctx, cancel := context.WithCancel(testCtx(t))
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err := v.new(options(f, v.base)).Complete(ctx, hiRequest())
			is.True(errors.Is(err, context.Canceled))
			is.True(!upstream.Retryable(err))
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
		})
	}
}

// TestBackends_IdleTimeout checks that a stream that stalls after its
// first event fails with a timeout and cancels the upstream request.
func TestBackends_IdleTimeout(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			is := is.New(t)
			gone := make(chan struct{})
			f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, v.first)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				close(gone)
			})
			o := options(f, v.base)
			o.IdleTimeout = 100 * time.Millisecond
			s, err := v.new(o).Stream(testCtx(t), hiRequest())
			is.NoErr(err) // stream
			defer s.Close()
			start := time.Now()
			for s.Next() {
			}
			le := llmError(t, s.Err())
			is.Equal(le.Kind, llm.KindTimeout)
			is.Equal(le.Message, "the upstream model stopped responding")
			is.True(time.Since(start) < 3*time.Second)
			is.True(!upstream.Retryable(s.Err())) // an event was produced
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
		})
	}
}

// TestBackends_FirstByteTimeout checks that an upstream that sends nothing
// in time fails the call before any event, retryably.
func TestBackends_FirstByteTimeout(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			is := is.New(t)
			f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			})
			o := options(f, v.base)
			o.FirstByteTimeout = 100 * time.Millisecond
			o.IdleTimeout = time.Hour // not the one that fires
			b := v.new(o)
			_, err := b.Stream(testCtx(t), hiRequest())
			le := llmError(t, err)
			is.Equal(le.Kind, llm.KindTimeout)
			is.True(upstream.Retryable(err))
			_, err = b.Complete(testCtx(t), hiRequest())
			is.Equal(llmError(t, err).Kind, llm.KindTimeout)
		})
	}

	t.Run("headers in time but no event", func(t *testing.T) {
		is := is.New(t)
		f := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		o := options(f, "/v1")
		o.FirstByteTimeout = 100 * time.Millisecond
		_, err := upstream.NewOpenAI(o).Stream(testCtx(t), hiRequest())
		is.Equal(llmError(t, err).Kind, llm.KindTimeout)
		is.True(upstream.Retryable(err))
	})
}

// TestBackends_ConnectTimeout checks the connect timeout with a server that
// accepts connections but never answers the TLS handshake.
func TestBackends_ConnectTimeout(t *testing.T) {
	is := is.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err) // listen
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	b := upstream.NewOpenAI(upstream.HTTPOptions{BaseURL: "https://" + ln.Addr().String() + "/v1", Model: canaryModel, ConnectTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err = b.Complete(testCtx(t), hiRequest())
	le := llmError(t, err)
	is.Equal(le.Kind, llm.KindTimeout)
	is.True(time.Since(start) < 5*time.Second)
	is.True(upstream.Retryable(err))
}

func TestBackends_Unreachable(t *testing.T) {
	is := is.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err) // listen
	addr := ln.Addr().String()
	ln.Close()
	_, err = upstream.NewAnthropic(upstream.HTTPOptions{BaseURL: "http://" + addr}).Complete(testCtx(t), hiRequest())
	le := llmError(t, err)
	is.Equal(le.Kind, llm.KindUpstream)
	is.Equal(le.Message, "the upstream model could not be reached")
	is.True(upstream.Retryable(err))
}

// TestBackends_Limits checks that the router fills a candidate's limits
// from a protocol backend.
func TestBackends_Limits(t *testing.T) {
	is := is.New(t)
	lim := upstream.Limits{ContextLength: 1000000, MaxCompletionTokens: 65536}
	for _, v := range vendors {
		r := upstream.NewRouter([]upstream.Candidate{{Name: v.name, Backend: v.new(upstream.HTTPOptions{Limits: lim})}})
		is.Equal(r.Candidates(llm.TypePro, llm.TierLow)[0].Limits, lim)
	}
}
