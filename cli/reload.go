package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/server"
)

// reloader re-reads serve's --config file on SIGHUP and on the admin
// listener's POST /-/reload (which svcgw config reload uses), and swaps
// what it sets into the running server: routes, upstreams (credentials
// included), prices and per-call limits, for the calls that start after
// it. A file that does not load is refused whole: its errors are logged,
// one line each with its file:line, and the configuration in force stays.
type reloader struct {
	cmd     *serveCmd
	srv     *server.Server
	log     *slog.Logger
	metrics *server.Metrics
	// tracer is the running tracer (nil: off): the telemetry section is
	// read once, at the start, and each reloaded router keeps it.
	tracer *telemetry.Tracer

	mu  sync.Mutex     // one reload at a time
	cfg *config.Config // the configuration in force
}

// errNoConfig answers a reload of a serve started without --config.
var errNoConfig = errors.New("svcgw serve was started without --config (the fixture backend serves every route): there is no file to reload")

// reload re-reads the file; by says what asked (SIGHUP, admin).
func (r *reloader) reload(by string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.swap()
	r.metrics.ObserveReload(err)
	var errs config.Errors
	switch {
	case errors.As(err, &errs):
		for _, ce := range errs {
			r.log.Error("configuration reload refused; the running configuration is kept", "by", by, "error", ce.Error())
		}
	case err != nil:
		r.log.Error("configuration reload refused; the running configuration is kept", "by", by, "error", err)
	default:
		r.log.Info("configuration reloaded", "by", by, "file", r.cmd.Config, "upstreams", len(r.cfg.Upstreams))
	}
	return err
}

func (r *reloader) swap() error {
	if r.cmd.Config == "" {
		return errNoConfig
	}
	cfg, err := config.LoadFile(r.cmd.Config)
	if err != nil {
		return err // config.Errors name the file and line
	}
	router, err := buildRouter(cfg, r.log, r.cmd.fixtureOptions(), routerTracer(r.tracer))
	if err != nil {
		return fmt.Errorf("%s: %w", r.cmd.Config, err)
	}
	if err := r.srv.Reload(r.cmd.serverOptions(cfg, router)); err != nil {
		return err
	}
	// What the process reads once keeps its value until a restart.
	old, now := r.cfg.Limits, cfg.Limits
	for _, f := range []struct {
		key     string
		changed bool
	}{
		{"limits.header_timeout", old.HeaderTimeout != now.HeaderTimeout},
		{"limits.idle_timeout", old.IdleTimeout != now.IdleTimeout},
		{"limits.max_connections", old.MaxConnections != now.MaxConnections},
		{"limits.budget_refresh", old.BudgetRefresh != now.BudgetRefresh},
		{"retention.generations", r.cfg.Retention.Generations != cfg.Retention.Generations},
		{"telemetry", !reflect.DeepEqual(r.cfg.Telemetry, cfg.Telemetry)},
	} {
		if f.changed {
			r.log.Warn("configuration reloaded, but this setting takes effect at the next start", "setting", f.key, "file", r.cmd.Config)
		}
	}
	r.cfg = cfg
	return nil
}
