package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/svcgw/svcgw/llm"
)

// Request bodies: how slow and how large they may be.
const (
	// DefaultBodyTimeout is how long a request body may take before it must
	// be arriving at the minimum rate, and the longest pause allowed while
	// it arrives.
	DefaultBodyTimeout = 20 * time.Second
	// DefaultBodyMinRate is the slowest a body may arrive on average, in
	// bytes per second, once its timeout has passed: a 32 MiB body may take
	// nine hours at this rate, so any real link gets through, while a
	// connection that trickles a byte at a time is cut.
	DefaultBodyMinRate = 1024
)

// bodyGuard guards one request body, between net/http and the handler:
//
//   - It enforces the body's read deadline. The connection's deadline is
//     set when the request starts (now + timeout) and moved as bytes
//     arrive, to the earlier of now + timeout (no pause longer than the
//     timeout) and start + timeout + bytes read ÷ minimum rate (the
//     average rate since the start). A body that arrives at a reasonable
//     rate is never cut, however large; one that stalls or trickles is.
//     Once the body has been read the deadline is lifted, so the
//     connection's watch for a caller who leaves mid-stream is not cut.
//   - It caps the body's size (http.MaxBytesReader, 413).
//   - When the reply starts before the body was read to its end (a 401, a
//     429 or any refusal met before the body is needed), it tells net/http
//     to close the connection after the reply instead of reading the rest
//     of the body first, which a slow sender could make last until the
//     deadline. Authentication, the request-rate check and routing all run
//     before the body is read, so a caller without a valid key never holds
//     a connection longer than its headers take.
//
// It is both the request's Body and the handler's ResponseWriter: one
// allocation per request with a body.
type bodyGuard struct {
	http.ResponseWriter
	inner http.ResponseWriter // net/http's own, under every wrapper
	rc    http.ResponseController
	body  io.ReadCloser // MaxBytesReader over the connection's body

	start    time.Time
	timeout  time.Duration
	minRate  int64
	maxBody  int64
	read     int64
	deadline time.Time // the read deadline now set on the connection
	done     bool      // the body was read to its end (or failed)
	timedOut bool      // a read failed at the deadline
	replied  bool
	eof      bool // read to its end, and closed
}

// deadlineStep is how far the deadline must move before it is set again:
// setting it is cheap, but not free, and reads come in small pieces.
const deadlineStep = 100 * time.Millisecond

// withBody guards the request body (see bodyGuard). Requests without one
// pass through untouched.
func (s *Server) withBody(next http.Handler) http.Handler {
	serve := serveFunc(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			serve(w, r)
			return
		}
		set := s.current()
		g := &bodyGuard{
			ResponseWriter: w,
			inner:          w,
			rc:             *http.NewResponseController(w),
			start:          time.Now(),
			timeout:        set.bodyTimeout,
			minRate:        set.bodyMinRate,
			maxBody:        set.maxBody,
		}
		for {
			u, ok := g.inner.(interface{ Unwrap() http.ResponseWriter })
			if !ok {
				break
			}
			g.inner = u.Unwrap()
		}
		// Given net/http's own writer, a body over the limit also makes
		// the server close the connection after the 413.
		g.body = http.MaxBytesReader(g.inner, r.Body, g.maxBody)
		g.setDeadline(g.start.Add(g.timeout))
		r.Body = g
		serve(g, r)
	})
}

func (g *bodyGuard) Read(p []byte) (int, error) {
	if g.eof {
		return 0, io.EOF
	}
	n, err := g.body.Read(p)
	if n > 0 && err == nil {
		g.read += int64(n)
		now := time.Now()
		d := now.Add(g.timeout)
		if byRate := g.start.Add(g.timeout + time.Duration(float64(g.read)/float64(g.minRate)*float64(time.Second))); byRate.Before(d) {
			d = byRate
		}
		if d.Sub(g.deadline) >= deadlineStep { // d only grows: both terms do
			g.setDeadline(d)
		}
	}
	if err != nil && !g.done {
		g.done = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			g.timedOut = true
		} else {
			g.setDeadline(time.Time{})
		}
		if err == io.EOF {
			// Read to its end: closed now, net/http's writing of the
			// reply's header has nothing to drain. Otherwise it reads
			// the body once more for its end, ~2 KB deeper than the
			// header's own 2.8 KB frame: enough to double a stream's
			// handler stack (see serveStream). Reads after this one
			// still end as this one did.
			g.eof = true
			_ = g.body.Close()
		}
	}
	return n, err
}

func (g *bodyGuard) Close() error { return g.body.Close() }

func (g *bodyGuard) setDeadline(d time.Time) {
	g.deadline = d
	_ = g.rc.SetReadDeadline(d) // fails only on writers that cannot (httptest recorders)
}

// beforeReply closes the connection after the reply when the body was not
// read to its end: reading the rest first could take until the deadline.
func (g *bodyGuard) beforeReply() {
	if g.replied {
		return
	}
	g.replied = true
	if g.done && !g.timedOut {
		return
	}
	// A MaxBytesReader that overflows is the documented way to tell the
	// server to close the connection after this reply; net/http then
	// also lingers briefly after the reply, so the caller reads it instead
	// of a reset. It needs the server's own ResponseWriter.
	var one [1]byte
	_, _ = http.MaxBytesReader(g.inner, io.NopCloser(strings.NewReader("x")), 0).Read(one[:])
	g.ResponseWriter.Header().Set("Connection", "close")
	// net/http still closes the body when the handler returns, which reads
	// what is left of a small one: the deadline makes that fail at once.
	g.setDeadline(time.Now())
}

func (g *bodyGuard) WriteHeader(code int) {
	g.beforeReply()
	g.ResponseWriter.WriteHeader(code)
}

func (g *bodyGuard) Write(b []byte) (int, error) {
	g.beforeReply()
	return g.ResponseWriter.Write(b)
}

func (g *bodyGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// readBody reads the whole (guarded) request body. The time it takes is
// the caller's, not svcgw's: the access record keeps it apart.
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	start := time.Now()
	// Allocated at its announced length when the guard allows it (a larger
	// one is refused by the guard).
	g, guarded := r.Body.(*bodyGuard)
	var limit int64
	if guarded {
		limit = g.maxBody
	}
	body, err := llm.ReadAllSized(r.Body, r.ContentLength, limit)
	if rec := recordFrom(r.Context()); rec != nil {
		rec.bodyRead += time.Since(start)
	}
	if err != nil {
		// The limits the guard applied (a reload may have changed the
		// server's since).
		set := s.current()
		maxBody, minRate, timeout := set.maxBody, set.bodyMinRate, set.bodyTimeout
		if guarded {
			maxBody, minRate, timeout = g.maxBody, g.minRate, g.timeout
		}
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, &llm.Error{Kind: llm.KindTooLarge,
				Message: fmt.Sprintf("request body is larger than the limit of %d bytes", maxBody)}
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, &llm.Error{Kind: llm.KindTimeout, Err: err,
				Message: fmt.Sprintf("the request body arrived too slowly: it must keep arriving at %d bytes per second on average after its first %s", minRate, timeout)}
		}
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Message: "could not read the request body", Err: err}
	}
	return body, nil
}
