// Package server is svcgw's HTTP front: it routes every path under /svc and
// the same path without it, runs the middleware (recover, request id, access
// log, body limit, authentication), and owns the inference pipeline shared by
// all surfaces: decode → classify → admit → route → encode → meter.
//
// server is the only package that ties the others together. Nothing imports
// it except cli (and its own tests).
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/account"
	"github.com/svcgw/svcgw/upstream"
)

// DefaultMaxBodyBytes is the request body limit when Options leaves it zero.
const DefaultMaxBodyBytes = 32 << 20

// Options are the dependencies of the HTTP handler.
type Options struct {
	Logger *slog.Logger     // required
	Store  *store.Store     // required
	Router *upstream.Router // required
	Prices *billing.Prices  // nil: billing.DefaultPrices()
	Now    func() time.Time // nil: time.Now
	// MaxBodyBytes limits request bodies (413 above it); 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Server is svcgw's http.Handler.
type Server struct {
	log     *slog.Logger
	store   *store.Store
	router  *upstream.Router
	prices  *billing.Prices
	now     func() time.Time
	maxBody int64
	account *account.Handler
	mux     *http.ServeMux
	handler http.Handler
}

// New returns the gateway's handler with every route registered.
func New(opts Options) *Server {
	s := &Server{
		log:     opts.Logger,
		store:   opts.Store,
		router:  opts.Router,
		prices:  opts.Prices,
		now:     opts.Now,
		maxBody: opts.MaxBodyBytes,
		mux:     http.NewServeMux(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.prices == nil {
		s.prices = billing.DefaultPrices()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	// The account endpoints speak the chat-completions envelope.
	s.account = account.New(s.store, s.now, func(w http.ResponseWriter, _ *http.Request, err error) {
		chatSurface.writeError(w, err)
	})
	s.routes()
	s.handler = s.withRecover(s.withRequestID(s.withAccessLog(s.mux)))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// Serve serves h on ln until ctx is done, then shuts down gracefully: it
// stops accepting, waits up to grace for calls in flight (streams included),
// and then cancels whatever is still open. Streams need no write timeout, so
// none is set; ReadHeaderTimeout guards against slow-loris clients.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, grace time.Duration) error {
	baseCtx, cancelAll := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAll()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Calls still open after the grace period are cancelled; their
		// handlers still meter what was generated before returning.
		cancelAll()
		err = srv.Close()
	}
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}
