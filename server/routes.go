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

// route is one line of the route table (see routes).
type route struct {
	// pattern is the ServeMux pattern.
	pattern string
	// serves says what the route serves, in docs/routes.md's words.
	serves string
	// h serves an authenticated route, whose failures (a 401 among them)
	// are written in sf's envelope, or, with sf nil, in the envelope of
	// the SDK that sent the request (see claimant).
	h  authedHandler
	sf surface.Codec
	// open serves an unauthenticated route (h nil).
	open http.Handler
}

// prefixes are the two places every caller route answers: under /svc and,
// for older clients, at the same path without it.
var prefixes = [...]string{"/svc", ""}

// routes is the route table: every method × path the server answers, and
// what answers it. docs/routes.md is the table written out
// (TestRoutes_Documented keeps it true). The middleware around the mux
// is, in order: recover → request id → access log → body guard (the
// body's read deadline and size limit, see bodyGuard; nothing is read
// yet) (see New); inside each authenticated route: authentication (401) →
// handler, which reads the body only after the checks that need none (the
// request rate), and whose failures withAuth writes in the route's
// envelope.
func (s *Server) routes() []route {
	// The inference surfaces, one line each: a surface's routes, envelope,
	// models list and bounded fields are its codec's (see surfaceRoutes).
	// The Responses surface seals with the server's key.
	s.surfaces = []surface.Codec{
		chat.Codec{},
		chat.ResponsesCodec{Sealer: s.sealer},
		messages.Codec{},
		gencontent.Codec{},
	}
	var rs []route
	for _, sf := range s.surfaces {
		rs = append(rs, s.surfaceRoutes(sf)...)
	}
	for _, p := range prefixes {
		rs = append(rs,
			// /v1/models is shared by all three SDKs; the caller's headers
			// pick the shape (see claimant), and so the error envelope.
			route{pattern: "GET " + p + "/v1/models", serves: "models list, in the calling SDK's shape", h: s.handleModels(nil)},
			route{pattern: "GET " + p + "/v1/models/{model...}", serves: "one model, in the calling SDK's shape", h: s.handleModels(nil)},
			route{pattern: "GET " + p + "/v1/credits", serves: "account: credits", sf: fallback, h: byValue(s.account.Credits)},
			route{pattern: "GET " + p + "/v1/usage", serves: "account: usage", sf: fallback, h: byValue(s.account.Usage)},
			route{pattern: "GET " + p + "/v1/generation", serves: "account: one generation", sf: fallback, h: byValue(s.account.Generation)},
			route{pattern: "GET " + p + "/v1/generations", serves: "account: generations", sf: fallback, h: byValue(s.account.Generations)},
			// Feedback writes rows: it counts against the key's requests
			// per minute like the count endpoints.
			route{pattern: "POST " + p + "/v1/feedback", serves: "account: feedback (requests per minute)", sf: fallback, h: s.withRPM(byValue(s.account.Feedback))},
		)
	}
	// Anything else (a client configured with a wrong base URL, most
	// often): 404 in the envelope of the SDK the request's headers point
	// to, so that the SDK can read it, rather than net/http's plain text;
	// chat-completions when nothing points elsewhere.
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.claimant(r).WriteError(w, notFoundRoute(r))
	})
	// A path that routes serve with other methods only is the 405, with
	// Allow; any other, the 404.
	catchAll := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowed(r); allow != "" {
			w.Header().Set("Allow", allow)
			s.claimant(r).WriteError(w, &llm.Error{Kind: llm.KindMethodNotAllowed,
				Message: fmt.Sprintf("%s %s is not served; this path takes %s", r.Method, r.URL.Path, allow)})
			return
		}
		notFound(w, r)
	})
	// The API's base URL answers a HEAD: Claude Code (2.1.197) sends one to
	// ANTHROPIC_BASE_URL before its first call, to open the connection.
	baseURL := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	rs = append(rs,
		// Liveness: the process answers. Readiness: it can take billable
		// calls (the database answers, the ledger keeps up).
		route{pattern: "GET /healthz", serves: "liveness", open: http.HandlerFunc(healthz)},
		route{pattern: "GET /readyz", serves: "readiness", open: s.handleReady(false)},
		route{pattern: "HEAD /svc", serves: "the base URL, for clients that open a connection with a HEAD", open: baseURL},
		route{pattern: "HEAD /svc/{$}", serves: "the base URL, for clients that open a connection with a HEAD", open: baseURL},
		route{pattern: "/", serves: "405 with Allow for a path served with other methods, else 404, in the calling SDK's envelope", open: catchAll},
	)
	// The dashboard page, for a key holder's browser: at the root and at
	// /svc/dashboard. "GET /{$}" matches "/" alone, so every other unknown
	// path is still the 404 above. The page signs in with a key itself and
	// calls the account routes; the page and its files need none.
	if s.dashboard != nil {
		page := s.dashboard.Page()
		rs = append(rs,
			route{pattern: "GET /{$}", serves: "dashboard page", open: page},
			route{pattern: "GET /svc/dashboard", serves: "dashboard page", open: page},
			route{pattern: "GET /svc/dashboard/{$}", serves: "dashboard page", open: page},
			route{pattern: "GET " + dashboard.AssetPrefix + "{name...}", serves: "dashboard files", open: s.dashboard.Assets(notFound)},
		)
	}
	return rs
}

// mount registers the route table's routes on the server's mux.
func (s *Server) mount(rs []route) {
	for _, rt := range rs {
		switch {
		case rt.h == nil:
			s.mux.Handle(rt.pattern, rt.open)
		case rt.sf == nil:
			s.mux.Handle(rt.pattern, s.withClaimantAuth(rt.h))
		default:
			s.mux.Handle(rt.pattern, s.withAuth(rt.sf, rt.h))
		}
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// surfaceRoutes are sf's routes, each under /svc and at its bare path, with
// sf's envelope. A route whose endpoint sf cannot serve (a count without
// a Counter, a list without a Lister, embeddings without an EmbedCodec)
// is a programming error, refused when the server is built.
func (s *Server) surfaceRoutes(sf surface.Codec) []route {
	endpoints := map[surface.Endpoint]authedHandler{surface.Generate: s.handleInference(&generateKind{sf})}
	if ec, ok := sf.(surface.EmbedCodec); ok {
		endpoints[surface.Embed] = s.handleInference(&embedKind{sf, ec})
	}
	if c, ok := sf.(surface.Counter); ok {
		endpoints[surface.CountTokens] = s.handleCount(c)
	}
	if l, ok := sf.(surface.Lister); ok {
		endpoints[surface.Models] = s.handleModels(l)
	}
	var rs []route
	for _, rt := range sf.Routes() {
		h, serves := endpoints[rt.Endpoint], endpointNames[rt.Endpoint]
		if rt.Pick != nil {
			h, serves = s.pick(sf, rt.Pick, endpoints), rt.Serves
		}
		if h == nil {
			panic(fmt.Sprintf("server: surface %s routes %s %s to an endpoint it does not serve", sf.Surface(), rt.Method, rt.Path))
		}
		for _, p := range prefixes {
			rs = append(rs, route{pattern: rt.Method + " " + p + rt.Path, serves: string(sf.Surface()) + ": " + serves, sf: sf, h: h})
		}
	}
	return rs
}

// endpointNames are the surface endpoints as docs/routes.md names them.
var endpointNames = map[surface.Endpoint]string{
	surface.Generate:    "inference (metered, billed)",
	surface.Embed:       "embeddings (metered, billed on input)",
	surface.CountTokens: "count tokens (requests per minute, never billed)",
	surface.Models:      "models list, or one model",
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
		// A HEAD-only route (the base URL's) is a courtesy to clients
		// that open a connection with one, not an endpoint: its path
		// stays the 404 for other methods.
		if _, pattern := s.mux.Handler(&probe); pattern != "/" && pattern != "" && !strings.HasPrefix(pattern, http.MethodHead+" ") {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// pick serves a route that serves several endpoints: pick says which one
// each request is for.
func (s *Server) pick(sf surface.Codec, pick func(*http.Request) (surface.Endpoint, error), endpoints map[surface.Endpoint]authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller *store.Key) error {
		e, err := pick(r)
		if err != nil {
			return err
		}
		h := endpoints[e]
		if h == nil {
			return s.unservedEndpoint(r, sf, e)
		}
		return h(w, r, caller)
	}
}

// unservedEndpoint is the failure of a request pick routed to an endpoint
// its surface does not serve (a programming error).
func (s *Server) unservedEndpoint(r *http.Request, sf surface.Codec, e surface.Endpoint) error {
	err := fmt.Errorf("surface %s picked endpoint %d, which it does not serve", sf.Surface(), e)
	s.log.Error("route", "request_id", RequestID(r.Context()), "err", err)
	return err
}

// byValue adapts a handler that takes the caller's key by value and
// answers its own failures (the account endpoints') to authedHandler.
func byValue(h func(http.ResponseWriter, *http.Request, store.Key)) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller *store.Key) error {
		h(w, r, *caller)
		return nil
	}
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
