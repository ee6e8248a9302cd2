package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/store/sqlite"
)

type configCmd struct {
	Check  configCheckCmd  `cmd:"" help:"Validate a configuration file; errors name their line."`
	Reload configReloadCmd `cmd:"" help:"Make the running svcgw serve re-read its --config file (as SIGHUP does)."`
}

type configCheckCmd struct {
	File string `arg:"" optional:"" type:"path" env:"SVCGW_CONFIG" help:"The YAML configuration file (default: SVCGW_CONFIG, as serve --config reads it)."`
}

func (c *configCheckCmd) Run(e *env) error {
	if c.File == "" {
		return errors.New("which file? give it (svcgw config check svcgw.yaml) or set SVCGW_CONFIG")
	}
	cfg, err := config.LoadFile(c.File)
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, ce := range errs {
			fmt.Fprintln(e.stderr, ce) // file:line: message
		}
		fmt.Fprintf(e.stderr, "%s: %d error(s)\n", c.File, len(errs))
		return exitError{code: 1}
	}
	if err != nil {
		return err
	}
	names := make([]string, 0, len(cfg.Upstreams))
	for name := range cfg.Upstreams {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(e.stdout, "%s: ok\n", c.File)
	for _, name := range names {
		u := cfg.Upstreams[name]
		fmt.Fprintf(e.stdout, "  upstream %s: %s, %d model(s)\n", name, u.Protocol, len(u.Models))
	}
	return nil
}

type configReloadCmd struct {
	AdminAddr string `help:"The running serve's --admin-addr: reload through its POST /-/reload and print the outcome. Without it, the serve on --db (a SQLite file) is sent SIGHUP (its pid is in the database's lock file) and logs the outcome."`
	AdminCA   string `name:"admin-ca" type:"existingfile" placeholder:"FILE" help:"The admin listener serves HTTPS (serve --admin-tls-cert): trust this PEM certificate authority (or the certificate itself) for it; without it, the system's roots."`
	AdminTLS  bool   `name:"admin-tls" help:"The admin listener serves HTTPS with a certificate the system's roots trust (implied by --admin-ca)."`
	// The token comes from the environment rather than the command line
	// where it can: a flag's value is in every process listing.
	AdminToken string `name:"admin-token" env:"SVCGW_ADMIN_TOKEN" placeholder:"TOKEN" help:"An admin token (svcgw admin tokens create, not read-only) for --admin-addr; better given in SVCGW_ADMIN_TOKEN than on the command line."`
}

func (c *configReloadCmd) Run(e *env) error {
	if c.AdminAddr != "" {
		return c.viaAdmin(e)
	}
	if postgres.IsDSN(e.global.DB) {
		// Instances on PostgreSQL share the database and no lock file:
		// each is reloaded on its own.
		return errors.New("on PostgreSQL, reload each instance through its admin listener (--admin-addr) or with SIGHUP")
	}
	sv, err := sqlite.ServingProcess(e.global.DB)
	if err != nil {
		return fmt.Errorf("%s: %w", e.global.DB, err)
	}
	pid := sv.PID
	if len(sv.Reloads) == 0 {
		return fmt.Errorf("svcgw serve (pid %d) was started without --config or TLS files: a reload has nothing to re-read; restart it with --config FILE", pid)
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGHUP)
	}
	if err != nil {
		return fmt.Errorf("signal svcgw serve (pid %d): %w (on Windows, pass --admin-addr)", pid, err)
	}
	fmt.Fprintf(e.stdout, "sent SIGHUP to svcgw serve (pid %d); it logs \"configuration reloaded\", or each file:line error of a file it refused (keeping the configuration in force)\n", pid)
	return nil
}

// viaAdmin asks the admin listener to reload, and reports its answer.
func (c *configReloadCmd) viaAdmin(e *env) error {
	if c.AdminToken == "" {
		return errors.New("--admin-addr needs an admin token: set SVCGW_ADMIN_TOKEN (or --admin-token) to one that svcgw admin tokens create printed")
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	client, scheme := http.DefaultClient, "http"
	if c.AdminTLS || c.AdminCA != "" {
		scheme = "https"
		if c.AdminCA != "" {
			pem, err := os.ReadFile(c.AdminCA)
			if err != nil {
				return fmt.Errorf("--admin-ca: %w", err)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--admin-ca %s: no PEM certificate in it", c.AdminCA)
			}
			client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		}
	}
	url := scheme + "://" + c.AdminAddr + "/-/reload"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return fmt.Errorf("--admin-addr: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reload through %s: %w", url, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string   `json:"status"`
		Errors []string `json:"errors"`
		Error  struct {
			Message string `json:"message"`
		} `json:"error"` // a refusal's (403)
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("reload through %s: %s, and no JSON answer: %w", url, resp.Status, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		fmt.Fprintln(e.stdout, "reloaded")
		return nil
	case http.StatusUnprocessableEntity:
		for _, msg := range answer.Errors {
			fmt.Fprintln(e.stderr, msg) // file:line: message
		}
		fmt.Fprintln(e.stderr, "reload refused: svcgw serve keeps the configuration in force")
		return exitError{code: 1}
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("reload through %s: %s: %s", url, resp.Status, answer.Error.Message)
	}
	if answer.Error.Message != "" {
		return fmt.Errorf("reload through %s: %s: %s", url, resp.Status, answer.Error.Message)
	}
	return fmt.Errorf("reload through %s: %s", url, resp.Status)
}
