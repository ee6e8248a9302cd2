package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strings"
)

// Admin returns the handler of the admin listener (serve --admin-addr):
// the operator's view of the gateway, on an address of its own that
// callers are not given. None of its routes is served on the caller
// address (ServeHTTP), except /healthz and /readyz, which load balancers
// probe there, and whose caller-address answer names no backend.
//
//	GET  /metrics          Prometheus metrics (see Metrics); 404 without them
//	GET  /readyz           readiness, naming the candidates whose breakers are open
//	GET  /healthz          liveness
//	     /debug/pprof/…    net/http/pprof: profiles, traces, goroutines
//	POST /-/reload         re-read the configuration file (reload): 200, or
//	                       422 with its file:line errors (the old one is kept)
//
// reload may be nil: /-/reload is then 404.
func (s *Server) Admin(reload func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.metrics.Handler())
	}
	mux.Handle("GET /readyz", s.handleReady(true))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeAdminJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if reload != nil {
		mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, r *http.Request) {
			if err := reload(r.Context()); err != nil {
				// One line per error: config.Errors puts each file:line
				// error on a line of its own.
				writeAdminJSON(w, http.StatusUnprocessableEntity, map[string]any{
					"status": "refused", "errors": strings.Split(err.Error(), "\n"),
				})
				return
			}
			writeAdminJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
		})
	}
	return s.withRecover(mux)
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
