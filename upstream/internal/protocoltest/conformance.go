package protocoltest

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

// Vendor is one protocol backend as the conformance suite sees it: how to
// build it against a fake upstream, and one event of its stream format.
type Vendor struct {
	New   func(o upstream.HTTPOptions) upstream.Backend
	Base  string // appended to the fake upstream's URL to make BaseURL
	First string // the start of a stream, up to its first output event, the text "Hi"
	// Errors are error replies of the vendor's own (a quota, a context
	// window, a bad key told apart by the body), tried beside the ones
	// every protocol maps alike.
	Errors []ErrorCase
}

// ErrorCase is an upstream error reply and the *llm.Error it must become.
type ErrorCase struct {
	Name       string
	Status     int
	Header     map[string]string
	Body       string
	Kind       llm.Kind
	Message    string
	RetryAfter time.Duration
	Retryable  bool
}

// Conformance runs what every protocol backend must do the same way over
// the shared transport: map error replies to caller-safe errors, cancel
// the upstream request when the caller leaves, time out on a silent or
// stalled upstream, report an unreachable one, and give the router its
// limits.
func Conformance(t *testing.T, v Vendor) {
	t.Run("error mapping", func(t *testing.T) { errorMapping(t, v) })
	t.Run("stream disconnect", func(t *testing.T) { streamDisconnect(t, v) })
	t.Run("complete disconnect", func(t *testing.T) { completeDisconnect(t, v) })
	t.Run("idle timeout", func(t *testing.T) { idleTimeout(t, v) })
	t.Run("first byte timeout", func(t *testing.T) { firstByteTimeout(t, v) })
	t.Run("connect timeout", func(t *testing.T) { connectTimeout(t, v) })
	t.Run("unreachable", func(t *testing.T) { unreachable(t, v) })
	t.Run("limits", func(t *testing.T) { limits(t, v) })
	if _, ok := v.New(upstream.HTTPOptions{}).(upstream.Embedder); ok {
		t.Run("embed", func(t *testing.T) { embedConformance(t, v) })
	}
}

func hiRequest() *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("Hi")}}}}
}

// genericErrors are the error replies every protocol maps alike.
var genericErrors = func() []ErrorCase {
	generic := `{"error":{"message":"canary-backend-model says no","type":"canary_error","code":"canary"}}`
	return []ErrorCase{
		{Name: "400 is the request's fault", Status: 400, Body: generic, Kind: llm.KindInvalidRequest, Message: "the upstream model rejected the request"},
		{Name: "422 too", Status: 422, Body: generic, Kind: llm.KindInvalidRequest, Message: "the upstream model rejected the request"},
		{Name: "401 is the gateway's credentials", Status: 401, Body: generic, Kind: llm.KindUpstream, Message: "the gateway's upstream credentials were rejected"},
		{Name: "403 too", Status: 403, Body: generic, Kind: llm.KindUpstream, Message: "the gateway's upstream credentials were rejected"},
		{Name: "404 model not available", Status: 404, Body: generic, Kind: llm.KindUpstream, Message: "the upstream model is not available"},
		{Name: "408 timeout", Status: 408, Body: generic, Kind: llm.KindTimeout, Retryable: true, Message: "the upstream model did not respond in time"},
		{Name: "413 too large", Status: 413, Body: generic, Kind: llm.KindTooLarge, Message: "the request is too large for the upstream model"},
		{Name: "429 with retry-after seconds", Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: generic, Kind: llm.KindRateLimited, RetryAfter: 7 * time.Second, Retryable: true, Message: "the upstream model is rate limited; retry later"},
		{Name: "429 with retry-after-ms", Status: 429, Header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"}, Body: generic, Kind: llm.KindRateLimited, RetryAfter: 1500 * time.Millisecond, Retryable: true, Message: "the upstream model is rate limited; retry later"},
		{Name: "500", Status: 500, Body: "<html>canary proxy error</html>", Kind: llm.KindUpstream, Retryable: true, Message: "the upstream model failed"},
		{Name: "502", Status: 502, Body: generic, Kind: llm.KindUpstream, Retryable: true, Message: "the upstream model failed"},
		{Name: "503 overloaded", Status: 503, Header: map[string]string{"Retry-After": "3"}, Body: generic, Kind: llm.KindOverloaded, RetryAfter: 3 * time.Second, Retryable: true, Message: "the upstream model is overloaded; retry later"},
		{Name: "504 timeout", Status: 504, Body: generic, Kind: llm.KindTimeout, Retryable: true, Message: "the upstream model did not respond in time"},
		{Name: "529 overloaded", Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"canary Overloaded"}}`, Kind: llm.KindOverloaded, Retryable: true, Message: "the upstream model is overloaded; retry later"},
	}
}()

// errorMapping checks that upstream error replies become caller-safe
// *llm.Error values of the right kind, with retry guidance and without the
// vendor's message, on Complete and on Stream.
func errorMapping(t *testing.T, v Vendor) {
	for _, rw := range append(genericErrors[:len(genericErrors):len(genericErrors)], v.Errors...) {
		t.Run(rw.Name, func(t *testing.T) {
			f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
				for k, val := range rw.Header {
					w.Header().Set(k, val)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(rw.Status)
				fmt.Fprint(w, rw.Body)
			})
			b := v.New(Options(f, v.Base))
			for _, stream := range []bool{false, true} {
				is := is.New(t)
				req := hiRequest()
				req.Stream = stream
				var err error
				if stream {
					_, err = b.Stream(Context(t), req)
				} else {
					_, err = b.Complete(Context(t), req)
				}
				le := LLMError(t, err)
				is.Equal(le.Kind, rw.Kind)
				is.Equal(le.Message, rw.Message)
				is.Equal(le.RetryAfter, rw.RetryAfter)
				is.Equal(upstream.Retryable(err), rw.Retryable)
				var se *upstream.StatusError
				is.True(errors.As(err, &se)) // the vendor's reply is kept for logs
				is.Equal(se.StatusCode, rw.Status)
				NoLeak(t, "error", le)
			}
		})
	}
}

// streamDisconnect checks that a caller leaving mid-stream cancels the
// upstream request.
func streamDisconnect(t *testing.T, v Vendor) {
	is := is.New(t)
	gone := make(chan struct{})
	f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, v.First)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	ctx, cancel := context.WithCancel(Context(t))
	s, err := v.New(Options(f, v.Base)).Stream(ctx, hiRequest())
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
}

// completeDisconnect checks that a caller leaving cancels a non-streaming
// upstream request.
func completeDisconnect(t *testing.T, v Vendor) {
	is := is.New(t)
	gone := make(chan struct{})
	f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(gone)
	})
	ctx, cancel := context.WithCancel(Context(t))
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := v.New(Options(f, v.Base)).Complete(ctx, hiRequest())
	is.True(errors.Is(err, context.Canceled))
	is.True(!upstream.Retryable(err))
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
}

// idleTimeout checks that a stream that stalls after its first event fails
// with a timeout and cancels the upstream request.
func idleTimeout(t *testing.T, v Vendor) {
	is := is.New(t)
	gone := make(chan struct{})
	f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, v.First)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	o := Options(f, v.Base)
	o.IdleTimeout = 100 * time.Millisecond
	s, err := v.New(o).Stream(Context(t), hiRequest())
	is.NoErr(err) // stream
	defer s.Close()
	start := time.Now()
	for s.Next() {
	}
	le := LLMError(t, s.Err())
	is.Equal(le.Kind, llm.KindTimeout)
	is.Equal(le.Message, "the upstream model stopped responding")
	is.True(time.Since(start) < 3*time.Second)
	is.True(!upstream.Retryable(s.Err())) // an event was produced
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
}

// firstByteTimeout checks that an upstream that sends nothing in time
// fails the call before any event, retryably.
func firstByteTimeout(t *testing.T, v Vendor) {
	t.Run("no headers", func(t *testing.T) {
		is := is.New(t)
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		})
		o := Options(f, v.Base)
		o.FirstByteTimeout = 100 * time.Millisecond
		o.IdleTimeout = time.Hour // not the one that fires
		b := v.New(o)
		_, err := b.Stream(Context(t), hiRequest())
		le := LLMError(t, err)
		is.Equal(le.Kind, llm.KindTimeout)
		is.True(upstream.Retryable(err))
		_, err = b.Complete(Context(t), hiRequest())
		is.Equal(LLMError(t, err).Kind, llm.KindTimeout)
	})

	t.Run("headers in time but no event", func(t *testing.T) {
		is := is.New(t)
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		o := Options(f, v.Base)
		o.FirstByteTimeout = 100 * time.Millisecond
		_, err := v.New(o).Stream(Context(t), hiRequest())
		is.Equal(LLMError(t, err).Kind, llm.KindTimeout)
		is.True(upstream.Retryable(err))
	})
}

// connectTimeout checks the connect timeout with a server that accepts
// connections but never answers the TLS handshake.
func connectTimeout(t *testing.T, v Vendor) {
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
	b := v.New(upstream.HTTPOptions{BaseURL: "https://" + ln.Addr().String() + v.Base, Model: canaryModel, ConnectTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err = b.Complete(Context(t), hiRequest())
	le := LLMError(t, err)
	is.Equal(le.Kind, llm.KindTimeout)
	is.True(time.Since(start) < 5*time.Second)
	is.True(upstream.Retryable(err))
}

func unreachable(t *testing.T, v Vendor) {
	is := is.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err) // listen
	addr := ln.Addr().String()
	ln.Close()
	_, err = v.New(upstream.HTTPOptions{BaseURL: "http://" + addr + v.Base}).Complete(Context(t), hiRequest())
	le := LLMError(t, err)
	is.Equal(le.Kind, llm.KindUpstream)
	is.Equal(le.Message, "the upstream model could not be reached")
	is.True(upstream.Retryable(err))
}

// limits checks that the router fills a candidate's limits from the
// backend.
func limits(t *testing.T, v Vendor) {
	is := is.New(t)
	lim := upstream.Limits{ContextLength: 1000000, MaxCompletionTokens: 65536}
	r := upstream.NewRouter([]upstream.Candidate{{Name: "backend", Backend: v.New(upstream.HTTPOptions{Limits: lim})}})
	is.Equal(r.Candidates(llm.TypePro, llm.TierLow)[0].Limits, lim)
}
