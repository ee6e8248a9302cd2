package protocol

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// gzipServer answers every request with status and body, gzipped when
// the request accepts gzip (corrupt: a gzip stream cut short), and
// records the Accept-Encoding values it was sent. It speaks h2c beside
// HTTP/1.1.
func gzipServer(t *testing.T, status int, body string, corrupt bool) (*httptest.Server, *[]string) {
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		seen = append(seen, strings.Join(r.Header.Values("Accept-Encoding"), ","))
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Accept-Encoding") != "gzip" {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = io.WriteString(zw, body)
		_ = zw.Close()
		z := b.Bytes()
		if corrupt {
			z = z[:len(z)-6]
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		_, _ = w.Write(z)
	}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &seen
}

// TestClient_Gzip checks that a backend's headers ask for gzip themselves,
// so that the transport adds no header map of its own to each request,
// and that Post then decompresses what the transport used to: replies,
// error replies and streams; a configured Accept-Encoding is sent as it
// is, and its reply is not touched.
func TestClient_Gzip(t *testing.T) {
	const reply = `{"id":"chatcmpl-1","choices":[{"message":{"content":"hello"}}]}`
	base := func(bool) http.Header { return http.Header{} }

	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("a reply is decompressed, h2c=%v", h2c), func(t *testing.T) {
			is := is.New(t)
			srv, seen := gzipServer(t, http.StatusOK, reply, false)
			h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL, H2C: h2c}, "", nil)
			hdr := h.Headers(base)
			is.Equal(hdr.Call["Accept-Encoding"], []string{"gzip"})   // calls ask for gzip themselves
			is.Equal(hdr.Stream["Accept-Encoding"], []string{"gzip"}) // streams too
			b, err := h.PostRead(t.Context(), srv.URL, hdr.Call, []byte(`{}`))
			is.NoErr(err)                                           // post
			is.Equal(string(b), reply)                              // the reply, decompressed
			is.Equal(*seen, []string{"gzip"})                       // one Accept-Encoding, ours
			is.Equal(hdr.Call["Accept-Encoding"], []string{"gzip"}) // the shared header unchanged
		})
	}

	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("a stream is decompressed, h2c=%v", h2c), func(t *testing.T) {
			is := is.New(t)
			srv, _ := gzipServer(t, http.StatusOK, "data: {}\n\ndata: [DONE]\n\n", false)
			h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL, H2C: h2c}, "", nil)
			c, resp, err := h.Post(t.Context(), srv.URL, h.Headers(base).Stream, []byte(`{}`))
			is.NoErr(err) // post
			defer c.Release()
			defer resp.Body.Close()
			is.Equal(resp.Header.Get("Content-Encoding"), "") // dropped, as the transport drops it
			is.Equal(resp.ContentLength, int64(-1))
			is.True(resp.Uncompressed)
			b, err := io.ReadAll(resp.Body)
			is.NoErr(err) // read the stream
			is.Equal(string(b), "data: {}\n\ndata: [DONE]\n\n")
		})
	}

	t.Run("an error reply is decompressed before it is read", func(t *testing.T) {
		is := is.New(t)
		const body = `{"error":{"type":"insufficient_quota"}}`
		srv, _ := gzipServer(t, http.StatusTooManyRequests, body, false)
		var got string
		h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL}, "", func(_ int, b []byte) upstream.ErrorHint {
			got = string(b)
			return upstream.ErrorHint{}
		})
		_, err := h.PostRead(t.Context(), srv.URL, h.Headers(base).Call, []byte(`{}`))
		var le *llm.Error
		is.True(errors.As(err, &le)) // an upstream error
		is.Equal(got, body)          // the vendor's body, decompressed
	})

	t.Run("a corrupt gzip reply fails the call", func(t *testing.T) {
		is := is.New(t)
		srv, _ := gzipServer(t, http.StatusOK, reply, true)
		h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL}, "", nil)
		_, err := h.PostRead(t.Context(), srv.URL, h.Headers(base).Call, []byte(`{}`))
		var le *llm.Error
		is.True(errors.As(err, &le))        // a failure the caller is told of
		is.Equal(le.Kind, llm.KindUpstream) // an upstream one
	})

	t.Run("a configured Accept-Encoding is sent and its reply left alone", func(t *testing.T) {
		is := is.New(t)
		srv, seen := gzipServer(t, http.StatusOK, reply, false)
		h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL, Headers: map[string]string{"Accept-Encoding": "identity"}}, "", nil)
		b, err := h.PostRead(t.Context(), srv.URL, h.Headers(base).Call, []byte(`{}`))
		is.NoErr(err) // post
		is.Equal(string(b), reply)
		is.Equal(*seen, []string{"identity"})
	})

	t.Run("a header without Accept-Encoding: the transport's gzip, as before", func(t *testing.T) {
		is := is.New(t)
		srv, seen := gzipServer(t, http.StatusOK, reply, false)
		h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL}, "", nil)
		b, err := h.PostRead(t.Context(), srv.URL, http.Header{}, []byte(`{}`))
		is.NoErr(err) // post
		is.Equal(string(b), reply)
		is.Equal(*seen, []string{"gzip"})
	})
}
