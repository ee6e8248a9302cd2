package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/chat"
	"github.com/svcgw/svcgw/surfaces/dashboard"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/surfaces/messages"
	"github.com/svcgw/svcgw/surfaces/surface"
)

// fallback is the surface of what no surface claims: its envelope answers
// the account endpoints, unknown paths and panics, and its models list is
// the /v1/models of clients that say nothing else (see claimant).
var fallback surface.Codec = chat.Codec{}

// routes lists every route. Each answers under /svc and, for older clients,
// at the same path without it. The middleware around the mux is, in order:
// recover → request id → access log → body guard (the body's read deadline
// and size limit, see bodyGuard; nothing is read yet) (see New); inside
// each route: authentication (401) → handler, which reads the body only
// after the checks that need none (the request rate). Authentication failures use the
// envelope of the surface the path belongs to.
func (s *Server) routes() {
	// The inference surfaces, one line each: a surface's routes, envelope,
	// models list and bounded fields are its codec's (see mount). The
	// Responses surface seals with the server's key.
	s.surfaces = []surface.Codec{
		chat.Codec{},
		chat.ResponsesCodec{Sealer: s.sealer},
		messages.Codec{},
		gencontent.Codec{},
	}
	for _, sf := range s.surfaces {
		s.mount(sf)
	}
	for _, p := range []string{"/svc", ""} {
		// /v1/models is shared by all three SDKs; the caller's headers pick
		// the shape (see claimant), and so the error envelope.
		s.mux.Handle("GET "+p+"/v1/models", s.withModelsAuth(s.handleModels(nil)))
		s.mux.Handle("GET "+p+"/v1/models/{model...}", s.withModelsAuth(s.handleModels(nil)))

		s.handle("GET "+p+"/v1/credits", fallback, byValue(s.account.Credits))
		s.handle("GET "+p+"/v1/usage", fallback, byValue(s.account.Usage))
		s.handle("GET "+p+"/v1/generation", fallback, byValue(s.account.Generation))
		s.handle("GET "+p+"/v1/generations", fallback, byValue(s.account.Generations))
		// Feedback writes rows: it counts against the key's requests per
		// minute like the count endpoints.
		s.handle("POST "+p+"/v1/feedback", fallback, s.withRPM(fallback, byValue(s.account.Feedback)))
	}
	// Liveness: the process answers. Readiness: it can take billable
	// calls (the database answers, the ledger keeps up).
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	s.mux.Handle("GET /readyz", s.handleReady(false))
	// The API's base URL answers a HEAD: Claude Code (2.1.197) sends one to
	// ANTHROPIC_BASE_URL before its first call, to open the connection.
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	s.mux.HandleFunc("HEAD /svc", ok)
	s.mux.HandleFunc("HEAD /svc/{$}", ok)
	// Anything else (a client configured with a wrong base URL, most
	// often): 404 in the envelope of the SDK the request's headers point
	// to, so that the SDK can read it, rather than net/http's plain text;
	// chat-completions when nothing points elsewhere.
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.claimant(r).WriteError(w, notFoundRoute(r))
	})
	// A path that routes serve with other methods only is the 405, with
	// Allow.
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowed(r); allow != "" {
			w.Header().Set("Allow", allow)
			s.claimant(r).WriteError(w, &llm.Error{Kind: llm.KindMethodNotAllowed,
				Message: fmt.Sprintf("%s %s is not served; this path takes %s", r.Method, r.URL.Path, allow)})
			return
		}
		notFound(w, r)
	}))

	// The dashboard page, for a key holder's browser: at the root and at
	// /svc/dashboard. "GET /{$}" matches "/" alone, so every other unknown
	// path is still the 404 above. The page signs in with a key itself and
	// calls the account routes; the page and its files need none.
	if s.dashboard != nil {
		page := s.dashboard.Page()
		s.mux.Handle("GET /{$}", page)
		s.mux.Handle("GET /svc/dashboard", page)
		s.mux.Handle("GET /svc/dashboard/{$}", page)
		s.mux.Handle("GET "+dashboard.AssetPrefix+"{name...}", s.dashboard.Assets(notFound))
	}
}

// mount registers sf's routes, each under /svc and at its bare path, with
// sf's envelope for authentication failures. A route whose endpoint sf
// cannot serve (a count without a Counter, a list without a Lister) is a
// programming error, refused when the server is built.
func (s *Server) mount(sf surface.Codec) {
	endpoints := map[surface.Endpoint]authedHandler{surface.Generate: s.handleInference(sf)}
	if c, ok := sf.(surface.Counter); ok {
		endpoints[surface.CountTokens] = s.handleCount(sf, c)
	}
	if l, ok := sf.(surface.Lister); ok {
		endpoints[surface.Models] = s.handleModels(l)
	}
	for _, rt := range sf.Routes() {
		h := endpoints[rt.Endpoint]
		if rt.Pick != nil {
			h = s.pick(sf, rt.Pick, endpoints)
		}
		if h == nil {
			panic(fmt.Sprintf("server: surface %s routes %s %s to an endpoint it does not serve", sf.Surface(), rt.Method, rt.Path))
		}
		for _, p := range []string{"/svc", ""} {
			s.handle(rt.Method+" "+p+rt.Path, sf, h)
		}
	}
}

// routeMethods are the methods the routes use (a GET route also serves
// HEAD).
var routeMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost}

// allowed is the Allow header of r's path when routes serve it with other
// methods than r's, or "" when none does: what s.mux would route each
// method of r's path to, other than the catch-all 404.
func (s *Server) allowed(r *http.Request) string {
	var allow []string
	probe := *r
	for _, m := range routeMethods {
		if m == r.Method {
			continue
		}
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// pick serves a route that serves several endpoints: pick says which one
// each request is for.
func (s *Server) pick(sf surface.Codec, pick func(*http.Request) (surface.Endpoint, error), endpoints map[surface.Endpoint]authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller *store.Key) {
		e, err := pick(r)
		if err != nil {
			sf.WriteError(w, err)
			return
		}
		h := endpoints[e]
		if h == nil {
			s.unservedEndpoint(w, r, sf, e)
			return
		}
		h(w, r, caller)
	}
}

// unservedEndpoint answers a request pick routed to an endpoint its
// surface does not serve (a programming error). Out of pick's frame, below
// which a stream's handler runs (see serveStream).
//
//go:noinline
func (s *Server) unservedEndpoint(w http.ResponseWriter, r *http.Request, sf surface.Codec, e surface.Endpoint) {
	err := fmt.Errorf("surface %s picked endpoint %d, which it does not serve", sf.Surface(), e)
	s.log.Error("route", "request_id", RequestID(r.Context()), "err", err)
	sf.WriteError(w, err)
}

// byValue adapts a handler that takes the caller's key by value (the
// account endpoints') to authedHandler.
func byValue(h func(http.ResponseWriter, *http.Request, store.Key)) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller *store.Key) { h(w, r, *caller) }
}

// handle registers an authenticated route whose errors use sf's envelope.
func (s *Server) handle(pattern string, sf surface.Codec, h authedHandler) {
	s.mux.Handle(pattern, s.withAuth(sf, h))
}

// claimant is the surface whose SDK sent r, for a path that does not say
// (the shared /v1/models, an unknown path): the first surface that claims
// r by its headers, or the fallback.
func (s *Server) claimant(r *http.Request) surface.Codec {
	for _, sf := range s.surfaces {
		if c, ok := sf.(surface.Claimer); ok && c.Claims(r) {
			return sf
		}
	}
	return fallback
}
