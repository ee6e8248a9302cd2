package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/internal/logtext"
	"github.com/svcgw/svcgw/seal"
	"github.com/svcgw/svcgw/server"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

type serveCmd struct {
	Addr             string        `default:"127.0.0.1:8080" help:"Address to listen on."`
	Config           string        `type:"existingfile" env:"SVCGW_CONFIG" help:"YAML configuration (upstreams, routes, prices, limits); without one the fixture backend serves every route."`
	BootstrapCredits string        `default:"10.00" help:"Starter balance (USD) of the default account created on an empty database."`
	MaxBodyBytes     int64         `default:"0" help:"Request body limit in bytes (413 above it); 0 takes limits.max_body_bytes from --config, else 32 MiB."`
	ShutdownGrace    time.Duration `default:"30s" help:"How long open calls may finish after SIGINT/SIGTERM."`
	LogLevel         string        `default:"info" env:"SVCGW_LOG_LEVEL" enum:"debug,info,warn,error" help:"Log level (debug, info, warn, error)."`
	LogFormat        string        `default:"text" env:"SVCGW_LOG_FORMAT" enum:"text,json" help:"Log format (text, json)."`
	RPM              int64         `name:"rpm" default:"0" help:"Default requests per minute of each API key (0 = limits.rpm from --config, else unlimited); keys limit overrides it per key."`
	TPM              int64         `name:"tpm" default:"0" help:"Default tokens per minute of each API key (0 = limits.tpm from --config, else unlimited); keys limit overrides it per key."`
	BodyTimeout      time.Duration `default:"0s" help:"Longest pause in a request body, and how long before it must arrive at --body-min-rate (0 = limits.body_timeout from --config, else 20s)."`
	BodyMinRate      int64         `default:"0" help:"Slowest average rate of a request body after --body-timeout, in bytes per second (0 = limits.body_min_rate from --config, else 1024)."`
	HeaderTimeout    time.Duration `default:"0s" help:"How long a request's headers may take (0 = limits.header_timeout from --config, else 10s)."`
	IdleTimeout      time.Duration `default:"0s" help:"How long a keep-alive connection may wait for its next request (0 = limits.idle_timeout from --config, else 120s)."`
	MaxConnections   int           `default:"0" help:"Most caller connections open at once; more wait in the accept backlog (0 = limits.max_connections from --config, else derived from the file-descriptor limit)."`
	FixtureTTFT      time.Duration `name:"fixture-ttft" default:"0s" help:"Fixture backend: simulated time to first token."`
	FixtureTPS       float64       `name:"fixture-tps" default:"0" help:"Fixture backend: simulated output tokens per second (0 = instant)."`
	TLSCert          string        `name:"tls-cert" type:"existingfile" placeholder:"FILE" help:"Serve callers HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate (the leaf, then its chain); needs --tls-key. Re-read on reload (SIGHUP, POST /-/reload): new connections get the renewed one, open ones are kept."`
	TLSKey           string        `name:"tls-key" type:"existingfile" placeholder:"FILE" help:"The PEM private key of --tls-cert."`
	AdminTLSCert     string        `name:"admin-tls-cert" type:"existingfile" placeholder:"FILE" help:"Serve the admin listener HTTPS with this PEM certificate (may be --tls-cert's); needs --admin-tls-key. Re-read on reload like --tls-cert."`
	AdminTLSKey      string        `name:"admin-tls-key" type:"existingfile" placeholder:"FILE" help:"The PEM private key of --admin-tls-cert."`
	ReloadInterval   time.Duration `default:"0s" help:"Also reload (as SIGHUP does) when the contents of --config or of a TLS certificate or key file change, looking this often, e.g. 10s for a Kubernetes ConfigMap or Secret mounted as files; 0 = only on SIGHUP or POST /-/reload."`
	AdminAddr        string        `help:"Address of the admin listener, e.g. 127.0.0.1:9090: the management API /admin/v1/, Prometheus /metrics, /readyz naming what is wrong, /debug/pprof/ and POST /-/reload, all but /healthz and /readyz behind an admin token (svcgw admin tokens create). Off when empty; never reachable on --addr. Keep it off the network callers reach. Browsers' cross-origin requests are refused on it, and so is a Host that --admin-allowed-hosts does not allow."`
	AdminHosts       []string      `name:"admin-allowed-hosts" sep:"," placeholder:"NAME,…" help:"Host names the admin listener answers besides IP addresses, localhost, this machine's host name and --admin-addr's own host, e.g. svcgw.monitoring.svc,*.internal.example (* alone: any, which turns off the defence against DNS rebinding). A request with another Host gets 403."`
	AdminOpenMetrics bool          `name:"admin-open-metrics" help:"Serve the admin listener's /metrics without an admin token, for a Prometheus scraper that sends none."`
	GCFloor          int           `name:"gc-floor" default:"32" help:"Smallest heap the garbage collector lets grow before it collects, in MiB: while the live heap is under half of it, collect at this size instead of at twice the live heap (fewer collections at high request rates); 0 = the Go runtime's own pacing. GOGC or GOMEMLIMIT in the environment overrides it."`
	MetricsAppLabels int           `name:"metrics-application-labels" default:"0" help:"Label calls, tokens and cost in /metrics with the application (X-Title, Referer host or key name), for at most this many distinct applications; the rest count as \"other\" (0 = no application label)."`

	WALCheckpoint string `name:"wal-checkpoint" default:"aside" enum:"commit,ledger,aside" help:"SQLite only: where the write-ahead log is copied back into the database file once it passes 1,000 pages: commit (SQLite's own, inside the ledger commit that crosses it), ledger (by the ledger writer after that commit, once its waiters are answered and the calls waiting to run have run) or aside (as ledger, and with one CPU the runtime gets a second thread for the checkpoint's length, so calls keep running beside it)."`

	LeaseTTL time.Duration `name:"lease-ttl" default:"15s" help:"PostgreSQL only: how long this instance's balance leases hold without its heartbeat (sent every third of it), for an instance alive but cut off from the database; a crashed one's return to the others as soon as its database sessions end."`

	RetentionGenerations string `name:"retention-generations" placeholder:"DAYS" help:"Delete generation records older than this, e.g. 90d (usage totals, credits and balances are kept forever); overrides retention.generations from --config; 0 keeps every record."`
}

func (c *serveCmd) Run(e *env) (err error) {
	if c.LeaseTTL < 3*time.Second {
		return fmt.Errorf("--lease-ttl must be at least 3s (a heartbeat every third of it)")
	}
	if c.RPM < 0 || c.TPM < 0 {
		return fmt.Errorf("--rpm and --tpm must not be negative (0 is unlimited)")
	}
	if c.BodyTimeout < 0 || c.BodyMinRate < 0 || c.HeaderTimeout < 0 || c.IdleTimeout < 0 || c.MaxConnections < 0 {
		return fmt.Errorf("--body-timeout, --body-min-rate, --header-timeout, --idle-timeout and --max-connections must not be negative (0 keeps the default)")
	}
	if c.GCFloor < 0 || c.GCFloor > 1<<20 {
		return fmt.Errorf("--gc-floor must be between 0 (off) and 1048576 MiB")
	}
	defer startGCFloor(uint64(c.GCFloor) << 20)()
	memProfileOff(c.AdminAddr)
	if c.MetricsAppLabels < 0 {
		return fmt.Errorf("--metrics-application-labels must not be negative (0 is none)")
	}
	if c.AdminAddr != "" && c.AdminAddr == c.Addr && !strings.HasSuffix(c.Addr, ":0") { // :0 is a port each
		return fmt.Errorf("--admin-addr must differ from --addr: nothing of the admin listener may be reachable where callers are")
	}
	if c.ReloadInterval < 0 {
		return fmt.Errorf("--reload-interval must not be negative (0 is off)")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together: give both for HTTPS, or neither")
	}
	if (c.AdminTLSCert == "") != (c.AdminTLSKey == "") {
		return fmt.Errorf("--admin-tls-cert and --admin-tls-key go together: give both for HTTPS, or neither")
	}
	if c.AdminTLSCert != "" && c.AdminAddr == "" {
		return fmt.Errorf("--admin-tls-cert needs --admin-addr: there is no admin listener without it")
	}
	if len(c.AdminHosts) > 0 && c.AdminAddr == "" {
		return fmt.Errorf("--admin-allowed-hosts needs --admin-addr: there is no admin listener without it")
	}
	// From the start: SIGHUP's default would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	logOut := newLogWriter(e.stderr)
	defer logOut.Close()
	log := newLogger(logOut, c.LogLevel, c.LogFormat)
	var adminGuard *server.AdminGuard
	if c.AdminAddr != "" {
		if adminGuard, err = server.NewAdminGuard(log.With("listener", "admin"), c.AdminAddr, c.AdminHosts); err != nil {
			return err
		}
	}
	credits, err := billing.ParseAmount(c.BootstrapCredits)
	if err != nil {
		return fmt.Errorf("--bootstrap-credits: %w", err)
	}
	// Everything that can fail on the command line's account (the address,
	// the configuration) is checked before the database is opened, so a
	// failed start leaves no new database behind.
	cfg := config.Default() // no configuration: the fixture backend serves every route
	if c.Config != "" {
		if cfg, err = config.LoadFile(c.Config); err != nil {
			return err // each error names the file and line
		}
	}
	retention := cfg.Retention.Generations
	if c.RetentionGenerations != "" {
		if retention, err = config.ParseRetention(c.RetentionGenerations); err != nil {
			return fmt.Errorf("--retention-generations: %w", err)
		}
	}
	b := readBuild()
	// Spans wait in a bounded queue for the exporter, which connects when
	// it first sends: a collector that is down delays nothing here.
	tracer, err := startTracing(e.ctx, cfg.Telemetry, b.Version, log)
	if err != nil {
		return err
	}
	defer stopTracing(tracer, log) // after the ledger's flush: the last calls' spans included
	router, err := buildRouter(cfg, log, c.fixtureOptions(), routerTracer(tracer))
	if err != nil {
		return err
	}
	callerTLS, err := loadCertificate(c.TLSCert, c.TLSKey, "--tls-cert", log)
	if err != nil {
		return err
	}
	adminTLS, err := loadCertificate(c.AdminTLSCert, c.AdminTLSKey, "--admin-tls-cert", log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	var adminLn net.Listener
	if c.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", c.AdminAddr); err != nil {
			ln.Close()
			return fmt.Errorf("--admin-addr: %w", err)
		}
		defer adminLn.Close() // on an early return; Serve closes it otherwise
	}
	// Metrics are recorded only when something can read them.
	var metrics *server.Metrics
	if adminLn != nil {
		metrics = server.NewMetrics(server.MetricsOptions{
			Version: b.Version, Commit: b.Commit, GoVersion: runtime.Version(),
			ApplicationLabels: c.MetricsAppLabels,
		})
	}
	// One server per SQLite file, for its whole life: a second one would
	// spend the same balances without seeing the first one's charges. On
	// PostgreSQL several instances are the point: balance leases keep them
	// within the balance together.
	if !postgres.IsDSN(e.global.DB) {
		if err := e.checkDBDir(); err != nil {
			ln.Close()
			return err
		}
		lock, err := sqlite.LockServe(e.global.DB, c.reloads()...)
		if err != nil {
			ln.Close()
			return fmt.Errorf("%s: %w; stop it first, serve another --db, or move to PostgreSQL to run several (the admin commands work beside it)", e.global.DB, err)
		}
		defer lock.Release()
	}
	// The store's logger is the server's: ledger failures and every
	// generation it cannot record are reported there.
	st, err := e.createStore(store.Options{Logger: log, OnCommit: metrics.ObserveCommit, LeaseTTL: c.LeaseTTL, Checkpoint: c.WALCheckpoint})
	if err != nil {
		ln.Close()
		return err
	}
	// On an early return; the end of Run closes it and reports the flush.
	// Close is idempotent.
	defer st.Close()
	if err := bootstrap(e, st, credits, scheme(callerTLS)+"://"+reachable(ln.Addr())); err != nil {
		ln.Close()
		return err
	}
	sealer, err := sealerOf(e.ctx, st)
	if err != nil {
		ln.Close()
		return err
	}
	lim := cfg.Limits
	opts := c.serverOptions(cfg, router)
	opts.Logger, opts.Store, opts.Sealer, opts.Metrics, opts.Tracer = log, st, sealer, metrics, tracer
	opts.BudgetRefresh = lim.BudgetRefresh
	h := server.New(opts)
	// The background upkeep: the roll-up backfill of a database from an
	// older version, then retention. Stopped by st.Close.
	if err := st.StartUpkeep(store.UpkeepOptions{Retention: retention, Logger: log}); err != nil {
		ln.Close()
		return err
	}
	rl := &reloader{cmd: c, srv: h, log: log, metrics: metrics, cfg: cfg, tracer: tracer}
	for _, cert := range []*server.Certificate{callerTLS, adminTLS} {
		if cert != nil {
			rl.certs = append(rl.certs, cert)
		}
	}

	maxConns := cmp.Or(c.MaxConnections, lim.MaxConnections, server.DefaultMaxConns())
	attrs := []any{"addr", ln.Addr().String(), "scheme", scheme(callerTLS), "db", e.global.where(),
		"version", b.Version, "commit", b.Commit, "built", b.Date, "go", b.Go, "max_connections", maxConns}
	if adminLn != nil {
		attrs = append(attrs, "admin_addr", adminLn.Addr().String(), "admin_scheme", scheme(adminTLS))
	}
	log.Info("svcgw listening", attrs...)
	// A systemd unit of Type=notify is started once the listeners are
	// open, and told when its stop begins.
	if err := sdNotify("READY=1\nSTATUS=serving " + scheme(callerTLS) + "://" + ln.Addr().String()); err != nil {
		log.Warn("could not tell systemd that serve is ready", "err", err)
	}
	defer context.AfterFunc(e.ctx, func() { _ = sdNotify("STOPPING=1") })()
	// What start-up read of the binary need not stay mapped: ~12 MiB of
	// RSS at rest, 3–4 MiB at the peak of 1,000 open streams after load
	// (startpages_linux.go).
	if advised, resident := releaseStartPages(); advised > 0 {
		log.Debug("released the start-up pages of the executable", "mapped", advised, "resident", resident)
	}
	// The reloads (SIGHUP) and the admin listener run beside the caller
	// listener and end after it: metrics and profiles stay readable while
	// calls drain.
	var side sync.WaitGroup
	sideCtx, stopSide := context.WithCancel(context.WithoutCancel(e.ctx))
	side.Add(1)
	go func() {
		defer side.Done()
		for {
			select {
			case <-hup:
				_ = rl.reload("SIGHUP")
			case <-sideCtx.Done():
				return
			}
		}
	}()
	if c.ReloadInterval > 0 {
		side.Add(1)
		go func() {
			defer side.Done()
			rl.watch(sideCtx, c.ReloadInterval)
		}()
	}
	if adminLn != nil {
		side.Add(1)
		go func() {
			defer side.Done()
			admin := adminGuard.Handler(h.Admin(server.AdminOptions{Reload: func(context.Context) error { return rl.reload("admin") }, OpenMetrics: c.AdminOpenMetrics}))
			// A profile may take its time; a second of grace is plenty
			// for a scrape.
			if err := server.Serve(sideCtx, adminLn, admin, server.ServeOptions{Logger: log.With("listener", "admin"), Grace: time.Second, MaxConns: 64, TLS: adminTLS.TLSConfig()}); err != nil {
				log.Error("admin listener", "err", err)
			}
		}()
	}
	err = server.Serve(e.ctx, ln, h, server.ServeOptions{
		Logger: log, Grace: c.ShutdownGrace,
		HeaderTimeout: cmp.Or(c.HeaderTimeout, lim.HeaderTimeout),
		IdleTimeout:   cmp.Or(c.IdleTimeout, lim.IdleTimeout),
		MaxConns:      maxConns,
		TLS:           callerTLS.TLSConfig(),
	})
	stopSide()
	side.Wait()
	// Handlers cancelled at the end of the grace period still record what
	// their calls generated; st.Close then commits everything
	// queued. Only a handler stuck past drainTimeout is given up on (its
	// generation is then logged as dropped).
	drained := make(chan struct{})
	go func() { h.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		log.Error("shutdown: handlers still running; closing the ledger without them", "waited", drainTimeout.String())
	}
	if cerr := st.Close(); cerr != nil {
		log.Error("shutdown: flushing the ledger failed", "db", e.global.where(), "err", cerr)
		return errors.Join(err, cerr)
	}
	log.Info("shutdown: ledger flushed, database closed", "db", e.global.where())
	return err
}

// loadCertificate reads a listener's key pair; none when certFile is
// empty. A certificate that is not valid now is served all the same (a
// renewal may be on its way) but logged: clients will refuse it.
func loadCertificate(certFile, keyFile, flag string, log *slog.Logger) (*server.Certificate, error) {
	if certFile == "" {
		return nil, nil
	}
	cert, err := server.LoadCertificate(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := cert.Check(time.Now()); err != nil {
		log.Warn("TLS certificate not valid now; clients will refuse it", "flag", flag, "error", err)
	}
	return cert, nil
}

// reachable is where a client on this machine reaches a listener at addr:
// localhost for one on every address (0.0.0.0:8080 in the container
// image).
func reachable(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", strconv.Itoa(ta.Port))
	}
	return addr.String()
}

// scheme is what a listener with cert serves.
func scheme(cert *server.Certificate) string {
	if cert == nil {
		return "http"
	}
	return "https"
}

// fixtureOptions are the fixture backend's options from the flags.
func (c *serveCmd) fixtureOptions() fixture.Options {
	return fixture.Options{TimeToFirstToken: c.FixtureTTFT, TokensPerSecond: c.FixtureTPS}
}

// serverOptions are what the server takes from the flags and the
// configuration file: everything a reload replaces (see server.Reload).
// A flag given on the command line wins over the file, at the start and at
// every reload.
func (c *serveCmd) serverOptions(cfg *config.Config, router *upstream.Router) server.Options {
	lim := cfg.Limits
	return server.Options{
		Router: router, Prices: buildPrices(cfg),
		MaxBodyBytes:       firstNonZero(c.MaxBodyBytes, lim.MaxBodyBytes),
		RPM:                firstNonZero(c.RPM, int64(lim.RPM)),
		TPM:                firstNonZero(c.TPM, int64(lim.TPM)),
		FreeBytesPerMinute: lim.FreeBytesPerMinute,
		Bounds: server.Bounds{
			MaxMessages: lim.MaxMessages, MaxParts: lim.MaxParts,
			MaxTools: lim.MaxTools, MaxSchemaBytes: lim.MaxSchemaBytes,
		},
		ReserveOutputTokens: lim.ReserveOutputTokens,
		BodyTimeout:         cmp.Or(c.BodyTimeout, lim.BodyTimeout),
		BodyMinRate:         firstNonZero(c.BodyMinRate, lim.BodyMinRate),
	}
}

// firstNonZero is a flag's value when given, else the configuration's.
func firstNonZero(flag, cfg int64) int64 {
	if flag != 0 {
		return flag
	}
	return cfg
}

// drainTimeout bounds how long serve waits, after the shutdown grace, for
// cancelled handlers to record their generations.
const drainTimeout = 10 * time.Second

// bootstrap makes a fresh database usable at once: on an empty database it
// creates account "default" with one key and a starter balance, and prints
// the key (once) on stderr. Of several instances starting at once on one
// empty PostgreSQL database, only the one that creates the account does.
func bootstrap(e *env, st store.DB, credits apd.Decimal, base string) error {
	n, err := st.CountAccounts(e.ctx)
	if err != nil || n > 0 {
		return err
	}
	acct, created, err := st.EnsureAccount(e.ctx, "default")
	if err != nil || !created {
		return err
	}
	secret, key, err := st.CreateKey(e.ctx, acct.ID, "default")
	if err != nil {
		return err
	}
	if credits.Sign() > 0 {
		if _, err := st.AddCredits(e.ctx, acct.ID, credits, "bootstrap"); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stderr, "\nCreated account \"default\" with %s USD of credits and API key %s:\n\n    %s\n\nIt is shown only this once. Try:\n\n    curl -H \"Authorization: Bearer %s\" %s/svc/v1/credits\n\n",
		billing.Format(credits), key.ID, secret, secret, base)
	return nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(logtext.NewHandler(w, opts)) // slog.TextHandler's lines, cheaper
}

// sealerOf builds the sealer from the database's keys, which every
// instance on it shares: an id or signature one instance sealed opens on
// any other, and after a restart.
func sealerOf(ctx context.Context, st store.DB) (*seal.Box, error) {
	keys, err := st.SealKeys(ctx)
	if err != nil {
		return nil, err
	}
	sk := make([]seal.Key, len(keys))
	for i, k := range keys {
		sk[i] = seal.Key{ID: k.ID, Secret: k.Secret}
	}
	return seal.New(sk)
}

// reloads names what a reload of this serve re-reads, for the lock file
// that svcgw config reload reads.
func (c *serveCmd) reloads() []string {
	var what []string
	if c.Config != "" {
		what = append(what, "config")
	}
	if c.TLSCert != "" || c.AdminTLSCert != "" {
		what = append(what, "tls")
	}
	return what
}
