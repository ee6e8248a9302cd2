package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/surface"
	"github.com/svcgw/svcgw/upstream"
)

// handleCount serves a count-tokens endpoint: authenticated, never billed,
// never recorded, and counted against the key's requests per minute and
// its free bytes per minute (Options.FreeBytesPerMinute), since a count
// reads, decodes and counts the whole body: without a budget of its own, a
// key with no money could keep the gateway's cores busy for free.
func (s *Server) handleCount(c surface.Counter) authedHandler {
	return s.withRPM(func(w http.ResponseWriter, r *http.Request, caller *store.Key) error {
		limit := s.current().freeBytes
		took, err := s.limiter.AdmitFree(caller.ID, limit, r.ContentLength, s.now())
		if err != nil {
			return err
		}
		body, err := s.readBody(r)
		if err != nil {
			return err
		}
		s.limiter.SpendFree(caller.ID, limit, took, int64(len(body)), s.now())
		c.CountTokens(w, r, body)
		return nil
	})
}

// withRPM takes one request from the key's and its account's
// requests-per-minute buckets before next runs (and before the body is
// read), or refuses the request (429).
func (s *Server) withRPM(next authedHandler) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, caller *store.Key) error {
		if err := s.takeRequest(caller, limitOr(caller.Limits.RPM, s.current().rpm), s.now()); err != nil {
			return err
		}
		return next(w, r, caller)
	}
}

// withClaimantAuth is withAuth in the envelope of the SDK that sent the
// request (see claimant), for a path the SDKs share.
func (s *Server) withClaimantAuth(next authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.withAuth(s.claimant(r), next).ServeHTTP(w, r)
	})
}

// handleModels serves a models list (and one model, named by the route's
// {model...} wildcard) in l's shape, or, for the path the SDKs share
// (l nil), in the shape of the calling SDK (see claimant), with limits
// read from the routed backends now.
func (s *Server) handleModels(l surface.Lister) authedHandler {
	return func(w http.ResponseWriter, r *http.Request, _ *store.Key) error {
		lister := l
		if lister == nil {
			if lister, _ = s.claimant(r).(surface.Lister); lister == nil {
				lister = fallback.(surface.Lister)
			}
		}
		rl := s.current().router.Limits()
		lim := surface.Limits{ContextLength: rl.ContextLength, MaxCompletionTokens: rl.MaxCompletionTokens}
		if id := r.PathValue("model"); id != "" {
			lister.WriteModel(w, id, lim)
			return nil
		}
		lister.WriteModels(w, lim)
		return nil
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
// backed up (with how many answered generations wait to be recorded), on
// PostgreSQL the instance's balance leases unusable (its liveness lock
// lost), or routes without a usable candidate. The probe is
// unauthenticated, like /healthz. On the caller address (operator false)
// the database, the ledger and the leases are only "unavailable" and a
// blocked route is named by its request type and tier only; the admin
// listener also says why (the store's error, which names hosts and files)
// and names the candidates whose breakers are open, which callers never
// see.
func (s *Server) handleReady(operator bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.Ready(r.Context())
		body := struct {
			Status   string `json:"status"`
			Database string `json:"database,omitempty"`
			Ledger   string `json:"ledger,omitempty"`
			// Leases is set on PostgreSQL while this instance may not
			// spend its balance leases (its liveness lock lost, or no
			// heartbeat): it admits no billable call.
			Leases string `json:"leases,omitempty"`
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
			// The causes name the database's host, user and files: the
			// admin listener and the log have them, callers a word.
			s.logUnready(h)
			if h.Database != nil {
				body.Database = "unavailable"
				if operator {
					body.Database = h.Database.Error()
				}
			}
			if h.Ledger != nil {
				body.Ledger = "unavailable"
				if operator {
					body.Ledger = h.Ledger.Error()
				}
			}
			if h.Leases != nil {
				body.Leases = "unavailable"
				if operator {
					body.Leases = h.Leases.Error()
				}
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

// unreadyLogEvery bounds how often a failing readiness probe is logged:
// load balancers probe every few seconds.
const unreadyLogEvery = 10 * time.Second

// logUnready logs why the gateway is not ready, at most once every
// unreadyLogEvery. (The ledger's incidents have lines of their own.)
func (s *Server) logUnready(h Readiness) {
	if h.Database == nil {
		return
	}
	now := time.Now()
	last := s.unreadyLogged.Load()
	if now.UnixNano()-last < int64(unreadyLogEvery) || !s.unreadyLogged.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.log.Warn("readiness: the database did not answer", "err", h.Database)
}
