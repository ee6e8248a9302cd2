package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strings"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/admin"
)

// AdminOptions configure the admin listener (Admin).
type AdminOptions struct {
	// Reload re-reads the configuration file (POST /-/reload); nil: the
	// route is 404.
	Reload func(context.Context) error
	// OpenMetrics serves /metrics without an admin token, for a scraper
	// that sends none (serve --admin-open-metrics).
	OpenMetrics bool
}

// Admin returns the handler of the admin listener (serve --admin-addr):
// the operator's view of the gateway and its management API, on an
// address of its own that callers are not given. None of its routes is
// served on the caller address (ServeHTTP), except /healthz and /readyz,
// which load balancers probe there, and whose caller-address answer names
// no backend.
//
//	GET  /metrics          Prometheus metrics (see Metrics); 404 without them
//	GET  /readyz           readiness, naming the candidates whose breakers are open
//	GET  /healthz          liveness
//	     /debug/pprof/…    net/http/pprof: profiles, traces, goroutines;
//	                       cmdline with every password in it redacted
//	POST /-/reload         re-read the configuration file (reload): 200, or
//	                       422 with its file:line errors (the old one is kept)
//	     /admin/v1/…       the management API (surfaces/admin, docs/admin-api.md)
//	GET  /admin/           the operator's page, and its files under
//	                       /admin/assets/ (mountOperator, docs/operator.md)
//	GET  /admin/token      the request's admin token: name, read-only
//
// Every route but /healthz, /readyz, the operator's page and its files
// and, with OpenMetrics, /metrics needs
// an admin token (admin.Guard): 401 without one, 403 for a change asked
// with a read-only one. serve puts an AdminGuard in front of it all, which
// refuses foreign Hosts and other origins' browser requests before any
// token is looked at.
func (s *Server) Admin(opts AdminOptions) http.Handler {
	mux := http.NewServeMux()
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.metrics.Handler())
	}
	mux.Handle("GET /readyz", s.handleReady(true))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeAdminJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if reload := opts.Reload; reload != nil {
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
	mux.Handle(admin.Prefix, admin.New(s.store, s.now, s.log.With("listener", "admin")))
	s.mountOperator(mux)
	open := func(r *http.Request) bool {
		if operatorOpen(r) {
			return true
		}
		switch r.URL.Path {
		case "/healthz", "/readyz":
			return true
		case "/metrics":
			return opts.OpenMetrics
		}
		return false
	}
	return s.withRecover(admin.Guard(s.store, open, s.log, mux))
}

// cmdline is pprof.Cmdline with every password on the command line
// replaced by "xxxxx": a --db postgres:// URL may carry one.
func cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = redactArg(a)
	}
	_, _ = io.WriteString(w, strings.Join(args, "\x00"))
}

// redactArg is a command-line argument with any password in it replaced
// by "xxxxx", as store.Redact does it for any URL: its user:password, a
// password or sslpassword parameter. A flag's value given after '='
// (--db=postgres://…) is redacted alike.
func redactArg(arg string) string {
	prefix, value := "", arg
	if strings.HasPrefix(arg, "-") {
		if name, v, ok := strings.Cut(arg, "="); ok {
			prefix, value = name+"=", v
		}
	}
	if !store.IsURL(value) {
		return arg
	}
	if _, err := url.Parse(value); err != nil && !strings.Contains(value, "@") {
		return arg // unparsable, but with no user info to hide
	}
	if r := store.Redact(value); r != value {
		return prefix + r
	}
	return arg
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
