package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/chat"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/surfaces/messages"
	"github.com/svcgw/svcgw/upstream"
)

// countFunc is a surface's advisory token counter: it decodes the body and
// writes the native count response or error. It never reaches a backend.
type countFunc func(w http.ResponseWriter, r *http.Request, body []byte)

// handleCount serves a count-tokens endpoint: authenticated and counted
// against the key's requests per minute (a count reads and decodes the
// whole body), never billed, never recorded.
func (s *Server) handleCount(sf surface, count countFunc) authedHandler {
	return s.withRPM(sf, func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		body, err := s.readBody(r)
		if err != nil {
			sf.writeError(w, err)
			return
		}
		count(w, r, body)
	})
}

// withRPM takes one request from the key's requests-per-minute bucket
// before next runs (and before the body is read), or answers 429 in sf's
// envelope.
func (s *Server) withRPM(sf surface, next authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller store.Key) {
		if err := s.limiter.Request(caller.ID, limitOr(caller.Limits.RPM, s.current().rpm), s.now()); err != nil {
			sf.writeError(w, err)
			return
		}
		next(w, r, caller)
	}
}

// handleStateless answers lookups of stored responses: svcgw serves the
// Responses API statelessly and keeps no response objects.
func (s *Server) handleStateless() authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		chat.WriteError(w, &llm.Error{Kind: llm.KindNotFound, Param: "response_id",
			Message: "responses are not stored: this gateway serves the Responses API statelessly (send store: false and replay the conversation)"})
	}
}

// handleGenContent dispatches POST …/v1beta/models/{model}:{method}; the
// ServeMux cannot match a wildcard followed by ":method" in one segment.
func (s *Server) handleGenContent() authedHandler {
	infer := s.handleInference(genContentSurface)
	count := s.handleCount(genContentSurface, gencontent.CountTokens)
	return func(w http.ResponseWriter, r *http.Request, caller store.Key) {
		_, method, err := gencontent.ParseModelMethod(r.PathValue("rest"))
		if err != nil {
			genContentSurface.writeError(w, err)
			return
		}
		switch method {
		case "countTokens":
			count(w, r, caller)
		default: // generateContent, streamGenerateContent (ParseModelMethod vetted it)
			infer(w, r, caller)
		}
	}
}

// handleGenContentModels lists models (or one) in the generate-content shape.
func (s *Server) handleGenContentModels() authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		lim := s.current().router.Limits()
		if rest := r.PathValue("rest"); rest != "" {
			gencontent.WriteModel(w, rest, lim.ContextLength, lim.MaxCompletionTokens)
			return
		}
		gencontent.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
	}
}

// headerSurface picks the surface whose SDK sent r when its path does not
// say (the shared /v1/models path, an unknown path): the messages version
// header marks Anthropic's SDKs, a Gemini key header or key= query Google's,
// and anything else is chat-completions.
func headerSurface(r *http.Request) surface {
	switch {
	case r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Msgs-Version") != "":
		return messagesSurface
	case r.Header.Get("X-Goog-Api-Key") != "" || r.Header.Get("X-Gen-Api-Key") != "" || r.URL.Query().Has("key"):
		return genContentSurface
	}
	return chatSurface
}

func (s *Server) withModelsAuth(next authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.withAuth(headerSurface(r), next).ServeHTTP(w, r)
	})
}

// handleModels serves GET /v1/models (and /v1/models/{id}) in the shape of
// the calling SDK, with limits read from the routed backends now.
func (s *Server) handleModels() authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ store.Key) {
		lim := s.current().router.Limits()
		id := r.PathValue("model")
		switch headerSurface(r).name {
		case llm.SurfaceMessages:
			if id != "" {
				messages.WriteModel(w, id, lim.ContextLength, lim.MaxCompletionTokens)
				return
			}
			messages.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
		case llm.SurfaceGenContent:
			if id != "" {
				gencontent.WriteModel(w, id, lim.ContextLength, lim.MaxCompletionTokens)
				return
			}
			gencontent.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
		default:
			if id != "" {
				chat.WriteModel(w, id, lim.ContextLength, lim.MaxCompletionTokens)
				return
			}
			chat.WriteModels(w, lim.ContextLength, lim.MaxCompletionTokens)
		}
	}
}

// Readiness is the answer of a readiness probe.
type Readiness struct {
	// Health is the database's: whether a read answers and the ledger
	// keeps up.
	store.Health
	// Blocked are the routes none of whose candidates can take a call:
	// it has none, or every one's breaker is open.
	Blocked []upstream.Blocked
}

// Ready reports whether the gateway can take billable calls.
func (r Readiness) Ready() bool { return r.Health.Ready() && len(r.Blocked) == 0 }

// Ready is the readiness check: whether the database answers, the ledger
// keeps up, and every route has a candidate whose breaker is not open.
// GET /readyz serves it, on the caller address and on the admin listener.
func (s *Server) Ready(ctx context.Context) Readiness {
	return Readiness{Health: s.store.Health(ctx), Blocked: s.current().router.Blocked()}
}

// handleReady serves GET /readyz: 200 {"status":"ready"}, or 503 with what
// is wrong — the database not answering, the ledger failing, stalled or
// backed up (with how many answered generations wait to be recorded), or
// routes without a usable candidate. The probe is unauthenticated, like
// /healthz. On the caller address (operator false) a blocked route is
// named by its request type and tier only; the admin listener also names
// the candidates whose breakers are open, which callers never see.
func (s *Server) handleReady(operator bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.Ready(r.Context())
		body := struct {
			Status   string `json:"status"`
			Database string `json:"database,omitempty"`
			Ledger   string `json:"ledger,omitempty"`
			// PendingGenerations are answered calls not yet in the
			// database: held in memory, and retried.
			PendingGenerations int64 `json:"pending_generations,omitempty"`
			// BlockedRoutes are type/tier pairs without a candidate
			// whose breaker is closed; OpenBreakers their candidates
			// (admin listener only).
			BlockedRoutes []string `json:"blocked_routes,omitempty"`
			OpenBreakers  []string `json:"open_breakers,omitempty"`
		}{Status: "ready"}
		status := http.StatusOK
		if !h.Ready() {
			status = http.StatusServiceUnavailable
			body.Status = "unavailable"
			body.PendingGenerations = h.Pending
			if h.Database != nil {
				body.Database = h.Database.Error()
			}
			if h.Ledger != nil {
				body.Ledger = h.Ledger.Error()
			}
			seen := map[string]bool{}
			for _, b := range h.Blocked {
				body.BlockedRoutes = append(body.BlockedRoutes, string(b.Type)+"/"+string(b.Tier))
				for _, c := range b.Open {
					if operator && !seen[c] {
						seen[c] = true
						body.OpenBreakers = append(body.OpenBreakers, c)
					}
				}
			}
		}
		b, _ := json.Marshal(body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write(append(b, '\n'))
	})
}
