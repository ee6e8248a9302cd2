package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/server"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/upstream"
)

type serveCmd struct {
	Addr             string        `default:"127.0.0.1:8080" help:"Address to listen on."`
	Config           string        `type:"existingfile" help:"YAML configuration (upstreams, routes, prices, limits); without one the fixture backend serves every route."`
	BootstrapCredits string        `default:"10.00" help:"Starter balance (USD) of the default account created on an empty database."`
	MaxBodyBytes     int64         `default:"0" help:"Request body limit in bytes (413 above it); 0 takes limits.max_body_bytes from --config, else 32 MiB."`
	ShutdownGrace    time.Duration `default:"30s" help:"How long open calls may finish after SIGINT/SIGTERM."`
	LogLevel         string        `default:"info" enum:"debug,info,warn,error" help:"Log level (debug, info, warn, error)."`
	LogFormat        string        `default:"text" enum:"text,json" help:"Log format (text, json)."`
	RPM              int64         `name:"rpm" default:"0" help:"Default requests per minute of each API key (0 = limits.rpm from --config, else unlimited); keys limit overrides it per key."`
	TPM              int64         `name:"tpm" default:"0" help:"Default tokens per minute of each API key (0 = limits.tpm from --config, else unlimited); keys limit overrides it per key."`
	FixtureTTFT      time.Duration `name:"fixture-ttft" default:"0s" help:"Fixture backend: simulated time to first token."`
	FixtureTPS       float64       `name:"fixture-tps" default:"0" help:"Fixture backend: simulated output tokens per second (0 = instant)."`

	RetentionGenerations string `name:"retention-generations" placeholder:"DAYS" help:"Delete generation records older than this, e.g. 90d (usage totals, credits and balances are kept forever); overrides retention.generations from --config; 0 keeps every record."`
}

func (c *serveCmd) Run(e *env) error {
	if c.RPM < 0 || c.TPM < 0 {
		return fmt.Errorf("--rpm and --tpm must not be negative (0 is unlimited)")
	}
	logOut := newLogWriter(e.stderr)
	defer logOut.Close()
	log := newLogger(logOut, c.LogLevel, c.LogFormat)
	credits, err := billing.ParseAmount(c.BootstrapCredits)
	if err != nil {
		return fmt.Errorf("--bootstrap-credits: %w", err)
	}
	st, err := e.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	if err := bootstrap(e, st, credits, ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}

	// No configuration: the fixture backend serves every route.
	cfg := config.Default()
	if c.Config != "" {
		if cfg, err = config.LoadFile(c.Config); err != nil {
			ln.Close()
			return fmt.Errorf("%s: %w", c.Config, err)
		}
	}
	retention := cfg.Retention.Generations
	if c.RetentionGenerations != "" {
		if retention, err = config.ParseRetention(c.RetentionGenerations); err != nil {
			ln.Close()
			return fmt.Errorf("--retention-generations: %w", err)
		}
	}
	router, err := buildRouter(cfg, log, upstream.FixtureOptions{TimeToFirstToken: c.FixtureTTFT, TokensPerSecond: c.FixtureTPS})
	if err != nil {
		ln.Close()
		return err
	}
	lim := cfg.Limits
	opts := server.Options{
		Logger: log, Store: st, Router: router, Prices: buildPrices(cfg),
		MaxBodyBytes: firstNonZero(c.MaxBodyBytes, lim.MaxBodyBytes),
		RPM:          firstNonZero(c.RPM, int64(lim.RPM)),
		TPM:          firstNonZero(c.TPM, int64(lim.TPM)),
		Bounds: server.Bounds{
			MaxMessages: lim.MaxMessages, MaxParts: lim.MaxParts,
			MaxTools: lim.MaxTools, MaxSchemaBytes: lim.MaxSchemaBytes,
		},
		ReserveOutputTokens: lim.ReserveOutputTokens,
		BudgetRefresh:       lim.BudgetRefresh,
	}
	h := server.New(opts)
	// The background upkeep: the roll-up backfill of a database from an
	// older version, then retention. Stopped by st.Close.
	if err := st.StartUpkeep(store.UpkeepOptions{Retention: retention, Logger: log}); err != nil {
		ln.Close()
		return err
	}

	log.Info("svcgw listening", "addr", ln.Addr().String(), "db", e.global.DB, "version", version())
	err = server.Serve(e.ctx, ln, h, log, c.ShutdownGrace)
	// Handlers cancelled at the end of the grace period still record what
	// their calls generated; the deferred st.Close then commits everything
	// queued. Only a handler stuck past drainTimeout is given up on (its
	// generation is then logged as dropped).
	drained := make(chan struct{})
	go func() { h.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		log.Error("shutdown: handlers still running; closing the ledger without them", "waited", drainTimeout.String())
	}
	return err
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
// the key (once) on stderr.
func bootstrap(e *env, st *store.Store, credits apd.Decimal, addr string) error {
	n, err := st.CountAccounts(e.ctx)
	if err != nil || n > 0 {
		return err
	}
	acct, _, err := st.EnsureAccount(e.ctx, "default")
	if err != nil {
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
	fmt.Fprintf(e.stderr, "\nCreated account \"default\" with %s USD of credits and API key %s:\n\n    %s\n\nIt is shown only this once. Try:\n\n    curl -H \"Authorization: Bearer %s\" http://%s/svc/v1/credits\n\n",
		billing.Format(credits), key.ID, secret, secret, addr)
	return nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
