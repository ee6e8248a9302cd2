package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// h2cServer serves HTTP/1.1 and unencrypted HTTP/2 with prior knowledge on
// one port, as a local server that speaks h2c does, answering each request
// with its protocol after release is closed, and counts the connections
// it accepts.
func h2cServer(t *testing.T, release <-chan struct{}, maxStreams int) (*httptest.Server, *atomic.Int32) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, r.Proto)
	}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: maxStreams}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestH2C checks that HTTPOptions.H2C sends requests over unencrypted
// HTTP/2, all of them open at once over one connection (more when the
// server allows fewer concurrent streams), while without it each takes an
// HTTP/1.1 connection of its own.
func TestH2C(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		h2c        bool
		maxStreams int
		conns      int32
	}{{true, 0, 1}, {true, 8, 3}, {false, 0, n}} {
		t.Run(fmt.Sprintf("h2c=%v,max-streams=%d", tc.h2c, tc.maxStreams), func(t *testing.T) {
			is := is.New(t)
			release := make(chan struct{})
			srv, conns := h2cServer(t, release, tc.maxStreams)
			h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL, H2C: tc.h2c}, "", nil)
			var wg sync.WaitGroup
			protos := make([]string, n)
			errs := make([]error, n)
			started := make(chan struct{}, n)
			for i := range n {
				wg.Go(func() {
					c, resp, err := h.Post(t.Context(), srv.URL, http.Header{}, []byte(`{}`))
					if err != nil {
						errs[i] = err
						started <- struct{}{}
						return
					}
					started <- struct{}{}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					c.Release()
					protos[i], errs[i] = string(b), err
				})
			}
			for range n {
				<-started // every request open at once
			}
			close(release)
			wg.Wait()
			want := "HTTP/2.0"
			if !tc.h2c {
				want = "HTTP/1.1"
			}
			for i := range n {
				is.NoErr(errs[i])
				is.Equal(protos[i], want)
			}
			is.Equal(conns.Load(), tc.conns) // connections the server accepted
		})
	}
}

// TestTLSNegotiatesHTTP2 checks that the shared transport speaks HTTP/2 to
// an https:// upstream that offers it: with a dialer of its own, a
// transport does so only when told to (ForceAttemptHTTP2).
func TestTLSNegotiatesHTTP2(t *testing.T) {
	is := is.New(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := newTransport()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	defer tr.CloseIdleConnections()
	h := NewClient(upstream.HTTPOptions{BaseURL: srv.URL, Client: &http.Client{Transport: tr}}, "", nil)
	c, resp, err := h.Post(t.Context(), srv.URL, http.Header{}, []byte(`{}`))
	is.NoErr(err)
	b, err := io.ReadAll(resp.Body)
	is.NoErr(err)
	resp.Body.Close()
	c.Release()
	is.Equal(resp.Proto, "HTTP/2.0")
	is.Equal(string(b), "HTTP/2.0")
}

// TestPost_RedirectIsNotFollowed: a 3xx from an upstream is an upstream
// failure, whatever the code, with the shared transport and with a client
// of one's own; the target never sees the call (nor its key), and the
// operator's cause names the status and where it pointed.
func TestPost_RedirectIsNotFollowed(t *testing.T) {
	var followed atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		_, _ = io.WriteString(w, `{}`)
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/v1/chat/completions", code)
		}))
		for _, client := range []*http.Client{nil, {}, {Timeout: time.Minute}} {
			t.Run(fmt.Sprintf("%d,client=%v", code, client != nil), func(t *testing.T) {
				is := is.New(t)
				h := NewClient(upstream.HTTPOptions{BaseURL: moved.URL, APIKey: "sk-secret", Client: client}, "", nil)
				c, _, err := h.Post(t.Context(), moved.URL+"/v1/chat/completions", http.Header{}, []byte(`{"model":"m"}`))
				is.True(c == nil)
				var le *llm.Error
				is.True(errors.As(err, &le))
				is.Equal(le.Kind, llm.KindUpstream)
				is.Equal(le.Message, "the upstream model failed") // what the caller reads: no address
				var se *upstream.StatusError
				is.True(errors.As(err, &se))
				is.Equal(se.StatusCode, code)
				is.Equal(se.Location, target.URL+"/v1/chat/completions")
				is.True(strings.Contains(se.Error(), "not followed"))
			})
		}
		moved.Close()
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}
