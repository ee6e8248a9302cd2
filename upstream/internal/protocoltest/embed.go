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

// EmbedRequest is the embeddings call most tests send: two texts.
func EmbedRequest(texts ...string) *llm.EmbedRequest {
	if len(texts) == 0 {
		texts = []string{"the quick brown fox", "jumps over the lazy dog"}
	}
	req := &llm.EmbedRequest{Model: "svc-embed"}
	for _, s := range texts {
		req.Inputs = append(req.Inputs, llm.EmbedInput{Text: s})
	}
	return req
}

// embedConformance runs what every protocol backend that embeds must do
// over the shared transport, as its generation calls do: error replies
// mapped alike (with the vendor's own cases), the upstream request
// cancelled when the caller leaves, the first-byte, idle and connect
// timeouts, and an unreachable upstream.
func embedConformance(t *testing.T, v Vendor) {
	embedder := func(o upstream.HTTPOptions) upstream.Embedder { return v.New(o).(upstream.Embedder) }
	embed := func(ctx context.Context, o upstream.HTTPOptions, texts ...string) error {
		_, err := embedder(o).Embed(ctx, EmbedRequest(texts...))
		return err
	}

	t.Run("error mapping", func(t *testing.T) {
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
				// One input and several: the protocols that send them to
				// different methods map their errors alike.
				for _, texts := range [][]string{{"one"}, {"one", "two"}} {
					is := is.New(t)
					err := embed(Context(t), Options(f, v.Base), texts...)
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
	})

	t.Run("disconnect", func(t *testing.T) {
		is := is.New(t)
		gone := make(chan struct{})
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			close(gone)
		})
		ctx, cancel := context.WithCancel(Context(t))
		time.AfterFunc(50*time.Millisecond, cancel)
		err := embed(ctx, Options(f, v.Base))
		is.True(errors.Is(err, context.Canceled)) // the caller's own cancellation
		is.True(!upstream.Retryable(err))
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("the upstream request was not cancelled")
		}
	})

	t.Run("first byte timeout", func(t *testing.T) {
		is := is.New(t)
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		o := Options(f, v.Base)
		o.FirstByteTimeout = 100 * time.Millisecond
		o.IdleTimeout = time.Hour // not the one that fires
		err := embed(Context(t), o)
		le := LLMError(t, err)
		is.Equal(le.Kind, llm.KindTimeout)
		is.Equal(le.Message, "the upstream model did not respond in time")
		is.True(upstream.Retryable(err))
	})

	t.Run("idle timeout mid-reply", func(t *testing.T) {
		is := is.New(t)
		gone := make(chan struct{})
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(gone)
		})
		o := Options(f, v.Base)
		o.IdleTimeout = 100 * time.Millisecond
		start := time.Now()
		err := embed(Context(t), o)
		le := LLMError(t, err)
		is.Equal(le.Kind, llm.KindTimeout)
		is.Equal(le.Message, "the upstream model stopped responding")
		is.True(time.Since(start) < 3*time.Second)
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("the upstream request was not cancelled")
		}
	})

	t.Run("connect timeout", func(t *testing.T) {
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
		err = embed(Context(t), upstream.HTTPOptions{BaseURL: "https://" + ln.Addr().String() + v.Base, Model: canaryModel, ConnectTimeout: 100 * time.Millisecond})
		is.Equal(LLMError(t, err).Kind, llm.KindTimeout)
		is.True(upstream.Retryable(err))
	})

	t.Run("unreachable", func(t *testing.T) {
		is := is.New(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		is.NoErr(err) // listen
		addr := ln.Addr().String()
		ln.Close()
		err = embed(Context(t), upstream.HTTPOptions{BaseURL: "http://" + addr + v.Base})
		le := LLMError(t, err)
		is.Equal(le.Kind, llm.KindUpstream)
		is.Equal(le.Message, "the upstream model could not be reached")
		is.True(upstream.Retryable(err))
	})

	t.Run("malformed reply", func(t *testing.T) {
		is := is.New(t)
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"canary": [`)
		})
		err := embed(Context(t), Options(f, v.Base))
		le := LLMError(t, err)
		is.Equal(le.Kind, llm.KindUpstream)
		is.Equal(le.Message, "the upstream model sent a malformed reply")
		NoLeak(t, "error", le)
	})
}
