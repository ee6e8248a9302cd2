// Package server is svcgw's HTTP front: it routes every path under /svc and
// the same path without it, runs the middleware (recover, request id, access
// log, body guard, authentication), and owns the inference pipeline shared by
// all surfaces: ledger check → rate limit → decode → bounds → classify →
// admit → route → encode → meter → settle.
//
// Limits, in the order an inference call meets them (see README "Balances,
// caps and limits"): the ledger's health (503 while it cannot record usage:
// store.CheckLedger); the key's requests per minute (429, before the body is
// read); the body size (413); the request bounds (400, Bounds); the key's
// tokens per minute, taking the input estimate (429; both rates are
// billing.RateLimiter's); then billing's admission, which reserves the
// call's cost ceiling against the balance and the account's and key's
// daily and monthly spend caps (402). When the call
// ends its generation is recorded (the ledger counts its actual cost from
// then on), its output tokens are taken from the tokens-per-minute bucket,
// and then its reservation is released. A call that fails releases without
// being charged. Count-tokens, models, account and feedback endpoints are
// never admitted (they never reach a model); count-tokens and feedback,
// which read bodies and write rows, take from the key's requests per
// minute.
//
// GET /healthz is liveness (always 200 while the process serves); GET
// /readyz is readiness (Server.Ready: 503 with the reason while the
// database does not answer, the ledger cannot record, or a route has no
// candidate whose breaker is closed).
//
// The operator's side is a handler of its own, Admin, served on a second
// listener: Prometheus metrics (Metrics, recorded once per call from the
// access record), readiness naming backends, pprof and configuration
// reload (Reload swaps the router, prices and limits for new calls).
//
// server is the only package that ties the others together. Nothing imports
// it except cli (and its own tests).
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/seal"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/account"
	"github.com/svcgw/svcgw/surfaces/dashboard"
	"github.com/svcgw/svcgw/surfaces/surface"
	"github.com/svcgw/svcgw/upstream"
)

// DefaultMaxBodyBytes is the request body limit when Options leaves it zero.
const DefaultMaxBodyBytes = 32 << 20

// DefaultFreeBytesPerMinute is each key's budget of request bodies on the
// free endpoints (token counts) when Options leaves it zero: one body of
// the default size limit a minute, about half a megabyte a second.
// Measured on e9ae07c (2026-12-02, 2 cores, the fixture backend): while two
// workers posted 16 MB count_tokens bodies from a key without money,
// another key's /v1/messages calls took 0.96 ms at the median (12.7 ms
// p99) with this budget, against 12.0 ms (90 ms p99) without one.
const DefaultFreeBytesPerMinute = 32 << 20

// Options are the dependencies of the HTTP handler.
type Options struct {
	Logger *slog.Logger     // required
	Store  store.DB         // required: SQLite or PostgreSQL
	Router *upstream.Router // required
	Prices *billing.Prices  // nil: billing.DefaultPrices()
	Now    func() time.Time // nil: time.Now
	// Metrics, when set, records each call and is read by the admin
	// listener (Admin); one Server per Metrics.
	Metrics *Metrics
	// MaxBodyBytes limits request bodies (413 above it); 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyTimeout and BodyMinRate bound how slowly a request body may
	// arrive: no pause longer than BodyTimeout, and on average at least
	// BodyMinRate bytes per second once BodyTimeout has passed (see
	// bodyGuard); 0 means DefaultBodyTimeout and DefaultBodyMinRate.
	BodyTimeout time.Duration
	BodyMinRate int64
	// Bounds limit decoded requests (400 beyond them); zero fields take
	// their defaults.
	Bounds Bounds
	// RPM and TPM are each key's requests and tokens per minute unless the
	// key sets its own; 0 means unlimited.
	RPM, TPM int64
	// FreeBytesPerMinute is how many bytes of request bodies each key may
	// send to the free endpoints (token counts) a minute, every request
	// counted as at least billing.MinFreeBytes; past it they are refused
	// with a 429 in the surface's envelope. 0 means
	// DefaultFreeBytesPerMinute; negative, unlimited.
	FreeBytesPerMinute int64
	// ReserveOutputTokens caps the output tokens a call's reservation
	// covers; 0 means billing.ReserveOutputTokens (4096).
	ReserveOutputTokens int
	// Sealer seals the tokens callers get and give back (Responses item
	// ids, reasoning signatures); nil: a fresh key of this process alone
	// (serve passes the database's keys, which every instance shares).
	Sealer *seal.Box
	// BudgetRefresh is how long account credits and caps read from the
	// database are trusted before being read again; 0 means
	// billing.DefaultRefresh (1s). A call that would be refused always
	// reads them again first.
	BudgetRefresh time.Duration
	// AccountLimits bound the account endpoints' work per key and per
	// request; zero fields take account's defaults.
	AccountLimits account.Limits
	// Tracer, when set, traces every inference call (server/trace.go);
	// the Router's own Tracer (upstream.RouterOptions) should be the same
	// one, for the upstream attempts to join the call's trace. nil: off.
	Tracer *telemetry.Tracer
}

// Server is svcgw's http.Handler.
type Server struct {
	log   *slog.Logger
	store store.DB
	now   func() time.Time
	// cur holds what a configuration reload replaces (see Reload).
	cur     atomic.Pointer[settings]
	metrics *Metrics          // nil: none recorded
	tracer  *telemetry.Tracer // nil: tracing off
	account *account.Handler
	// dashboard serves the browser page; nil if its embedded files are
	// broken (logged at New), when the page's routes are the 404.
	dashboard *dashboard.Handler
	mux       *http.ServeMux
	handler   http.HandlerFunc
	// surfaces are the inference wire formats served (see routes).
	surfaces []surface.Codec

	admission *billing.Admission
	limiter   *billing.RateLimiter // each key's per-minute buckets
	accounts  *billing.RateLimiter // each account's, across its keys (see takeRequest)
	sealer    *seal.Box
	sampler   *logSampler

	// unreadyLogged is when logUnready last logged (Unix nanoseconds).
	unreadyLogged atomic.Int64

	// inflight counts the requests being served, for Wait.
	inflightMu   sync.Mutex
	inflightZero *sync.Cond
	inflight     int
}

// New returns the gateway's handler with every route registered.
func New(opts Options) *Server {
	s := &Server{
		log:      opts.Logger,
		store:    opts.Store,
		now:      opts.Now,
		metrics:  opts.Metrics,
		tracer:   opts.Tracer,
		mux:      http.NewServeMux(),
		limiter:  billing.NewRateLimiter(),
		accounts: billing.NewRateLimiterFor("account"),
		sealer:   opts.Sealer,
	}
	s.cur.Store(settingsOf(opts))
	if s.sealer == nil {
		s.sealer = seal.NewEphemeral()
	}
	s.inflightZero = sync.NewCond(&s.inflightMu)
	adm := s.store.Admission()
	s.admission = billing.NewAdmission(ledgerOf(adm), billing.AdmissionOptions{Refresh: opts.BudgetRefresh})
	if l, ok := adm.(interface {
		ShrinkWith(func(accountID int64, fn func(reserved int64)))
	}); ok {
		l.ShrinkWith(s.admission.Hold)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.sampler = newLogSampler(s.log)
	if s.now == nil {
		s.now = time.Now
	}
	s.metrics.bind(s)
	// The account endpoints speak the chat-completions envelope.
	s.account = account.New(s.store, s.now, func(w http.ResponseWriter, _ *http.Request, err error) {
		fallback.WriteError(w, err)
	}, opts.AccountLimits)
	if dash, err := dashboard.New(); err != nil {
		s.log.Error("dashboard page unavailable", "error", err)
	} else {
		s.dashboard = dash
	}
	s.mount(s.routes())
	s.handler = serveFunc(s.withRecover(s.withRequestID(s.withAccessLog(s.withBody(s.mux)))))
	return s
}

// settings are what a configuration reload replaces: the routes and the
// upstreams behind them (credentials included), the prices and the
// per-call limits. A request reads them once, when it starts, and keeps
// them to its end, so a reload never changes a call in flight.
type settings struct {
	router      *upstream.Router
	prices      *billing.Prices
	maxBody     int64
	bodyTimeout time.Duration
	bodyMinRate int64
	bounds      Bounds
	rpm, tpm    int64
	freeBytes   int64 // 0: unlimited
	reserveOut  int
}

// settingsOf takes the reloadable fields of opts, with their defaults.
func settingsOf(opts Options) *settings {
	set := &settings{
		router:      opts.Router,
		prices:      opts.Prices,
		maxBody:     opts.MaxBodyBytes,
		bodyTimeout: cmp.Or(max(opts.BodyTimeout, 0), DefaultBodyTimeout),
		bodyMinRate: cmp.Or(max(opts.BodyMinRate, 0), DefaultBodyMinRate),
		bounds:      opts.Bounds.withDefaults(),
		rpm:         opts.RPM,
		tpm:         opts.TPM,
		freeBytes:   cmp.Or(opts.FreeBytesPerMinute, DefaultFreeBytesPerMinute),
		reserveOut:  opts.ReserveOutputTokens,
	}
	if set.freeBytes < 0 {
		set.freeBytes = 0
	}
	if set.prices == nil {
		set.prices = billing.DefaultPrices()
	}
	if set.maxBody <= 0 {
		set.maxBody = DefaultMaxBodyBytes
	}
	if set.reserveOut <= 0 {
		set.reserveOut = billing.ReserveOutputTokens
	}
	return set
}

// current is the settings a request starting now uses.
func (s *Server) current() *settings { return s.cur.Load() }

// Reload replaces, at once and for every request that starts after it,
// what a configuration file sets: opts' Router, Prices, MaxBodyBytes,
// BodyTimeout, BodyMinRate, Bounds, RPM, TPM, FreeBytesPerMinute and
// ReserveOutputTokens
// (zero fields take their defaults, as in New). Its other fields are
// ignored: they are the process's (the store, the logger, the sealer) or
// read once (BudgetRefresh). Requests in flight finish on the settings
// they started with, the old router's backends included.
func (s *Server) Reload(opts Options) error {
	if opts.Router == nil {
		return errors.New("reload: no router")
	}
	s.cur.Store(settingsOf(opts))
	return nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.inflightMu.Lock()
	s.inflight++
	s.inflightMu.Unlock()
	defer func() {
		s.inflightMu.Lock()
		if s.inflight--; s.inflight == 0 {
			s.inflightZero.Broadcast()
		}
		s.inflightMu.Unlock()
	}()
	s.handler(w, r)
}

// Wait blocks until no request is being served. Call it after Serve returns
// and before closing the store: a handler still running then (one whose
// call outlived the shutdown grace and was cancelled) has yet to record its
// generation.
func (s *Server) Wait() {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	for s.inflight > 0 {
		s.inflightZero.Wait()
	}
}

// storeLedger is the store's admission as billing's Ledger.
type storeLedger struct{ st store.Admitter }

// leasingLedger is storeLedger for a store whose budget is leased
// (PostgreSQL): billing.LeasingLedger.
type leasingLedger struct {
	storeLedger
	l interface {
		LeaseBudget(ctx context.Context, accountID int64, reserved, need int64) (store.Budget, error)
	}
}

func (l leasingLedger) LeaseBudget(ctx context.Context, accountID int64, reserved, need int64) (billing.Budget, error) {
	b, err := l.l.LeaseBudget(ctx, accountID, reserved, need)
	return billing.Budget(b), err
}

// ledgerOf adapts a store's admission to billing.
func ledgerOf(a store.Admitter) billing.Ledger {
	if l, ok := a.(interface {
		LeaseBudget(ctx context.Context, accountID int64, reserved, need int64) (store.Budget, error)
	}); ok {
		return leasingLedger{storeLedger{a}, l}
	}
	return storeLedger{a}
}

func (l storeLedger) Budget(ctx context.Context, accountID int64) (billing.Budget, error) {
	b, err := l.st.Budget(ctx, accountID)
	return billing.Budget(b), err
}

func (l storeLedger) Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (billing.Spend, error) {
	sp, err := l.st.Spend(ctx, accountID, keyID, now)
	return billing.Spend(sp), err
}

// ServeOptions configure Serve. Zero fields take the defaults.
type ServeOptions struct {
	Logger *slog.Logger // nil: discard
	// Grace is how long calls in flight may finish after ctx is done.
	Grace time.Duration
	// HeaderTimeout bounds reading a request's headers
	// (DefaultHeaderTimeout); IdleTimeout bounds a keep-alive connection's
	// wait for its next request (DefaultIdleTimeout).
	HeaderTimeout, IdleTimeout time.Duration
	// MaxConns caps the caller connections open at once
	// (DefaultMaxConns(), from the file-descriptor limit). Connections
	// beyond it wait in the accept backlog; idle keep-alive connections
	// are closed to make room (see limitListener).
	MaxConns int
	// TLS, when set, serves HTTPS (HTTP/2 and HTTP/1.1, by ALPN) instead
	// of plain HTTP; Certificate.TLSConfig makes one whose certificate a
	// reload renews.
	TLS *tls.Config
}

// Serve serves h on ln until ctx is done, then shuts down gracefully: it
// stops accepting, waits up to o.Grace for calls in flight (streams
// included), and then cancels whatever is still open. Streams need no
// write timeout, so none is set; the header timeout guards against
// slow-loris clients, the handler's body guard against slow bodies, and
// the connection cap against running out of file descriptors.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	grace := o.Grace
	baseCtx, cancelAll := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAll()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp.Or(max(o.HeaderTimeout, 0), DefaultHeaderTimeout),
		IdleTimeout:       cmp.Or(max(o.IdleTimeout, 0), DefaultIdleTimeout),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	maxConns := o.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns()
	}
	idle := newIdleConns()
	srv.ConnState = idle.track
	addr := ln.Addr().String() // says which listener shuts down, when a process has several
	ln = newLimitListener(ln, maxConns, func() { idle.closeIdle(pressureMinIdle) }, log)
	errc := make(chan error, 1)
	if o.TLS != nil {
		// ServeTLS offers h2 and http/1.1 by ALPN on a copy of it.
		srv.TLSConfig = o.TLS
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "addr", addr, "grace", grace.String())
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
