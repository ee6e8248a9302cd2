package cli

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

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
// It re-reads the listeners' TLS certificates too (--tls-cert,
// --admin-tls-cert), each on its own: a renewed certificate is taken even
// when the configuration file is refused, and the other way round.
type reloader struct {
	cmd     *serveCmd
	srv     *server.Server
	log     *slog.Logger
	metrics *server.Metrics
	certs   []*server.Certificate // the listeners' key pairs, if any
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
	certErr := r.reloadCerts(by)
	err := r.swap()
	if errors.Is(err, errNoConfig) && len(r.certs) > 0 {
		err = nil // the certificates were what there was to reload
	}
	r.metrics.ObserveReload(errors.Join(certErr, err))
	var errs config.Errors
	switch {
	case err == nil && r.cmd.Config != "":
		r.log.Info("configuration reloaded", "by", by, "file", r.cmd.Config, "upstreams", len(r.cfg.Upstreams))
	case errors.As(err, &errs):
		for _, ce := range errs {
			r.log.Error("configuration reload refused; the running configuration is kept", "by", by, "error", ce.Error())
		}
	case err != nil:
		r.log.Error("configuration reload refused; the running configuration is kept", "by", by, "error", err)
	}
	return errors.Join(certErr, err)
}

// watch reloads whenever the contents of --config or of a TLS file
// change, looking every interval, until ctx is done: a Kubernetes
// ConfigMap or Secret mounted as files is updated in place, with no
// signal sent. A file that cannot be read counts as changed once it can
// be again; the reload then reports what is wrong with it.
func (r *reloader) watch(ctx context.Context, every time.Duration) {
	last := r.fingerprint()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := r.fingerprint(); now != last {
			last = now
			_ = r.reload("file change")
		}
	}
}

// fingerprint is a digest of the watched files' contents.
func (r *reloader) fingerprint() [sha256.Size]byte {
	h := sha256.New()
	files := []string{r.cmd.Config}
	for _, c := range r.certs {
		cert, key := c.Files()
		files = append(files, cert, key)
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// reloadCerts re-reads each listener's key pair; one that does not load
// is refused and the one in force stays.
func (r *reloader) reloadCerts(by string) error {
	var errs []error
	for _, c := range r.certs {
		if err := c.Reload(); err != nil {
			r.log.Error("TLS certificate reload refused; the certificate in force is kept", "by", by, "error", err)
			errs = append(errs, err)
			continue
		}
		if err := c.Check(time.Now()); err != nil {
			r.log.Warn("TLS certificate not valid now; clients will refuse it", "by", by, "error", err)
		}
		r.log.Info("TLS certificate reloaded", append([]any{"by", by}, c.LogAttrs()...)...)
	}
	return errors.Join(errs...)
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
