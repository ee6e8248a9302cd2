package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/svcgw/svcgw/internal/logtext"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/surface"
	"github.com/svcgw/svcgw/upstream"
)

type ctxKey int

// logRecordKey is the context key of a request's *logRecord, which also
// holds its id: one context value and one copy of the request per call.
// The record is that context value itself (logRecord.Value).
const logRecordKey ctxKey = 0

// authedHandler is a handler that runs after authentication. It answers
// a failure by returning it: withAuth, the one exit of every authenticated
// route, writes it in the route's surface's envelope (see withAuth). A
// handler that has begun its reply (a stream, whose failures are events
// of the stream) answers its own failures and returns nil.
//
// It gets the caller's key by pointer, held in the request's logRecord:
// a key passed by value took ~0.3 KB of the frames below which every
// handler runs (see serveStream).
type authedHandler func(w http.ResponseWriter, r *http.Request, caller *store.Key) error

// logRecord collects what the access line reports about one request. The
// pipeline fills it in as it learns things; withAccessLog writes it at the
// end, and hands it to the metrics.
type logRecord struct {
	// The request's context, of which the record is the child that
	// carries it under logRecordKey: what context.WithValue would
	// allocate apart.
	context.Context

	id          string // the request id (withRequestID)
	route       string
	surface     llm.Surface
	requestType llm.RequestType
	keyID       string
	backend     upstream.Report // operator logs only
	usage       llm.Usage
	cost        money.Micros // when metered
	canceled    bool

	// For the metrics: call marks an inference call (handleInference);
	// metered, one whose generation was recorded (with its cost), whether
	// it streamed and when its first event was ready for the caller.
	// bodyRead is the time spent waiting for the caller's body; app the
	// attribution label.
	call, metered, streamed bool
	firstByte               time.Time
	bodyRead                time.Duration
	app                     string

	// span is the call's server span when tracing is on (trace.go).
	span trace.Span

	// In the record, so that one allocation holds them: the id's header
	// value (withRequestID), the status writer (withAccessLog) and the
	// caller's key (withAuth).
	idHeader [1]string
	sw       statusWriter
	caller   store.Key
}

// Value returns the record for logRecordKey, else what the request's
// context holds for key.
func (rec *logRecord) Value(key any) any {
	if key == logRecordKey {
		return rec
	}
	return rec.Context.Value(key)
}

// recordFrom is the request's record, or nil outside the middleware
// (withAccessLog gives every request one).
func recordFrom(ctx context.Context) *logRecord {
	rec, _ := ctx.Value(logRecordKey).(*logRecord)
	return rec
}

// RequestID returns the id withRequestID gave the request, or "".
func RequestID(ctx context.Context) string {
	if rec, _ := ctx.Value(logRecordKey).(*logRecord); rec != nil {
		return rec.id
	}
	return ""
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	var id [len("req_") + 2*len(b)]byte
	copy(id[:], "req_")
	hex.Encode(id[len("req_"):], b[:])
	return string(id[:])
}

// withRecover turns a panic in a handler into a 500 (when nothing was written
// yet) and an error log, instead of a dropped connection.
func (s *Server) withRecover(next http.Handler) http.Handler {
	serve := serveFunc(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // net/http's own way to abort a response: let it through
			}
			s.log.Error("panic", "request_id", RequestID(r.Context()), "panic", fmt.Sprint(v))
			fallback.WriteError(w, &llm.Error{Kind: llm.KindInternal, Message: "internal error"})
		}()
		serve(w, r)
	})
}

// serveFunc is h as a function, so that a middleware calls the next one
// directly rather than through HandlerFunc.ServeHTTP's frame (40 bytes a
// middleware on the stack of every handler: see serveStream).
func serveFunc(h http.Handler) http.HandlerFunc {
	if f, ok := h.(http.HandlerFunc); ok {
		return f
	}
	return h.ServeHTTP
}

// withRequestID gives every request an id, returned as X-Request-Id (and
// request-id, the header Anthropic's SDKs read). The id goes in the
// request's logRecord, which it puts in the context for withAccessLog and
// the pipeline.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	serve := serveFunc(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		rec := &logRecord{Context: r.Context(), id: id}
		// Both headers share one value slice: net/http only reads them.
		rec.idHeader[0] = id
		v := rec.idHeader[:]
		h := w.Header()
		h["X-Request-Id"], h["Request-Id"] = v, v
		// Every answer says what it is (JSON, SSE, the page and its
		// files): a browser must not guess otherwise.
		h["X-Content-Type-Options"] = nosniff
		serve(w, r.WithContext(rec))
	})
}

// nosniff is every response's X-Content-Type-Options, shared: net/http only
// reads it.
var nosniff = []string{"nosniff"}

// statusWriter records the status of a response. It unwraps, so
// http.ResponseController still reaches the real writer's Flush.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(b []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.ResponseWriter.Write(b)
}

func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// withAccessLog writes one line per request when it ends. It names the
// backend (operators may see it); nothing a caller reads does. Floods of
// caller faults are sampled (see logSampler).
func (s *Server) withAccessLog(next http.Handler) http.Handler {
	serve := serveFunc(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec, _ := r.Context().Value(logRecordKey).(*logRecord)
		if rec == nil { // not under withRequestID
			rec = &logRecord{Context: r.Context()}
			r = r.WithContext(rec)
		}
		sw := &rec.sw
		sw.ResponseWriter = w
		serve(sw, r)
		s.logAccess(r, rec, start)
	})
}

// logAccess observes a request that ended and writes its access line:
// withAccessLog's end.
func (s *Server) logAccess(r *http.Request, rec *logRecord, start time.Time) {
	status := callerStatus(r, rec)
	s.metrics.observeCall(rec, status, start, time.Now())
	if rec.span != nil {
		traceEnd(rec, status)
		defer traceRelease(rec)
	}
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || !s.sampler.allow(status) {
		return // probes: a line each would drown the log; floods of caller faults are sampled
	}
	// The record goes to the handler as slog.Logger.LogAttrs would
	// hand it, without the caller's program counter (no handler of
	// svcgw's adds the source): runtime.Callers was a tenth of the
	// line's cost.
	ctx, level, h := r.Context(), levelFor(status), s.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	var cost string // empty for a request that was not metered
	if rec.metered {
		cost = rec.cost.String()
	}
	attrs := [...]slog.Attr{
		slog.String("request_id", rec.id),
		slog.String("route", rec.route),
		slog.String("surface", string(rec.surface)),
		slog.String("request_type", string(rec.requestType)),
		slog.String("key_id", rec.keyID),
		slog.String("backend", rec.backend.Candidate),
		slog.Int("attempts", len(rec.backend.Attempts)),
		slog.Int("status", status),
		slog.Int("input_tokens", rec.usage.InputTokens),
		slog.Int("output_tokens", rec.usage.OutputTokens),
		slog.String("cost", cost),
		slog.Int("duration_ms", int(time.Since(start).Milliseconds())),
		slog.Bool("canceled", rec.canceled),
		{}, // trace_id, when the call was traced
	}
	kept := attrs[:len(attrs)-1]
	if rec.span != nil {
		attrs[len(attrs)-1] = slog.String("trace_id", telemetry.TraceID(rec.span))
		kept = attrs[:]
	}
	// svcgw's own handler takes the attributes as they are: a record
	// holds five in place and allocates for the other eight.
	if lh, ok := h.(*logtext.Handler); ok {
		_ = lh.HandleAttrs(ctx, time.Now(), level, "request", kept...)
		return
	}
	line := slog.NewRecord(time.Now(), level, "request", 0)
	line.AddAttrs(kept...)
	_ = h.Handle(ctx, line)
}

// StatusClientClosed is the status recorded (access log, metrics) for a
// call whose caller went away before it was answered: nginx's 499 "client
// closed request". Whatever the handler then wrote reached no one, and
// the error it answered (an upstream call or a database read cut short by
// the request's cancellation: 502, 500) was no fault of the server's.
const StatusClientClosed = 499

// callerStatus is the status to record for a request: the one written,
// unless the caller had gone before an answer (nothing written, or an
// error written to no one), which is StatusClientClosed and marks the
// record canceled. The request's context ends only when the caller's
// connection does while the handler runs (net/http cancels it at the end
// of ServeHTTP, which has not come yet).
func callerStatus(r *http.Request, rec *logRecord) int {
	status := rec.sw.status
	if r.Context().Err() != nil && (status == 0 || status >= 400) {
		rec.canceled = true
		return StatusClientClosed
	}
	return status
}

// apiKey finds the caller's key in any of the header spellings the three
// surfaces use: Authorization: Bearer (all), x-api-key (messages),
// x-goog-api-key (generate-content; x-gen-api-key is the contract's spelling, docs/contract.md#authentication),
// and the key= query parameter (generate-content). It returns "" when
// there is none.
//
// A request may carry its key in several of them, but only one key: two
// different keys are refused, whichever they are. No vendor SDK sends two
// (a client that does is misconfigured, or probing which one wins), and
// picking one would bill a key the caller may not have meant.
func apiKey(r *http.Request) (string, error) {
	var key, from string
	take := func(where, v string) error {
		switch v = strings.TrimSpace(v); {
		case v == "":
		case key == "":
			key, from = v, where
		case v != key:
			return &llm.Error{Kind: llm.KindAuth, Message: fmt.Sprintf(
				"conflicting API keys: %s and %s name different keys; send the key once", from, where)}
		}
		return nil
	}
	if v := headerValue(r.Header, "Authorization"); v != "" {
		if scheme, tok, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Bearer") {
			_ = take("Authorization: Bearer", tok) // the first: never a conflict
		}
	}
	// The headers by their canonical keys (headerValue).
	for _, h := range [...]struct{ name, key string }{
		{"x-api-key", "X-Api-Key"}, {"x-goog-api-key", "X-Goog-Api-Key"}, {"x-gen-api-key", "X-Gen-Api-Key"},
	} {
		if err := take(h.name, headerValue(r.Header, h.key)); err != nil {
			return "", err
		}
	}
	// Query would parse an empty query into a map of its own.
	if r.URL.RawQuery != "" {
		if err := take("?key=", r.URL.Query().Get("key")); err != nil {
			return "", err
		}
	}
	return key, nil
}

// withAuth resolves the caller's key and runs next; missing, unknown and
// revoked keys get a 401 in sf's envelope. It is the one exit of every
// authenticated route: the error next returns, as its own, is written
// here in sf's envelope (see fail).
func (s *Server) withAuth(sf surface.Codec, next authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recordFrom(r.Context())
		if rec == nil { // not under withAccessLog
			rec = &logRecord{Context: r.Context()}
			r = r.WithContext(rec)
		}
		err := s.authenticate(r, &rec.caller)
		if err == nil {
			rec.keyID, rec.route = rec.caller.ID, r.Pattern
			err = next(w, r, &rec.caller)
		}
		if err != nil {
			s.fail(w, r, sf, rec, err)
		}
	})
}

// fail answers a request whose handler returned err: in sf's envelope, with
// the status its kind maps to (an error that is not an *llm.Error is an
// internal error, and the envelope says no more). A reply already begun
// cannot take an envelope any more: the failure is logged and the reply
// ends as it is.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, sf surface.Codec, rec *logRecord, err error) {
	if rec.sw.status != 0 {
		s.log.Error("handler failed after its reply began", "request_id", rec.id, "route", r.Pattern, "err", err)
		return
	}
	sf.WriteError(w, err)
}

// authenticate resolves r's key into into.
func (s *Server) authenticate(r *http.Request, into *store.Key) error {
	secret, err := apiKey(r)
	if err != nil {
		return err
	}
	if secret == "" {
		return &llm.Error{Kind: llm.KindAuth, Message: "missing API key: send it as Authorization: Bearer <key>, x-api-key, x-goog-api-key or ?key="}
	}
	key, err := s.store.Authenticate(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		return &llm.Error{Kind: llm.KindAuth, Message: "invalid API key"}
	}
	if ee := (*store.ExpiredError)(nil); errors.As(err, &ee) {
		return &llm.Error{Kind: llm.KindAuth, Message: "API key expired at " + ee.At.UTC().Format(time.RFC3339) + ": ask for a new one"}
	}
	if errors.Is(err, store.ErrUnavailable) {
		return databaseUnavailable(fmt.Errorf("authenticate: %w", err))
	}
	if err != nil {
		return &llm.Error{Kind: llm.KindInternal, Message: "internal error", Err: fmt.Errorf("authenticate: %w", err)}
	}
	*into = key
	return nil
}

func notFoundRoute(r *http.Request) error {
	return &llm.Error{Kind: llm.KindNotFound, Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)}
}

// levelFor logs caller faults as warnings and our own failures as errors. A
// 503 is the gateway refusing work while something it depends on is down
// (the ledger, the database, an upstream): that is reported once, where it
// is known, so each refused call is only a warning.
func levelFor(status int) slog.Level {
	switch {
	case status == StatusClientClosed:
		return slog.LevelInfo // the caller's choice, not a fault
	case status == http.StatusServiceUnavailable:
		return slog.LevelWarn
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// headerValue is h.Get(key) for a key in canonical form, without Get's
// canonicalization, which allocates the canonical key for any other
// spelling and checks it costs ~200 instructions for this one: a call
// reads seven headers.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
