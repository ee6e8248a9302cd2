// Package cli is svcgw's command line: serve, keys, credits, usage,
// generation and backup, as a kong grammar with one command per file.
// Every flag can also be set from the environment as SVCGW_<FLAG> (e.g.
// SVCGW_DB, SVCGW_ADDR). Commands write only to the writers Run is given.
//
// cli may import server, store, config and the account surface (for the
// exact JSON shapes of usage and generation); nothing imports cli but main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/alecthomas/kong"

	"github.com/svcgw/svcgw/store"
)

// Version is set at build time with -ldflags "-X github.com/svcgw/svcgw/cli.Version=…".
var Version = ""

// version reports Version, or the module version the binary was built from.
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// Globals are the flags every command shares.
type Globals struct {
	DB string `name:"db" default:"svcgw.db" help:"SQLite database file." type:"path"`
}

// root is the whole grammar.
type root struct {
	Globals
	Version    kong.VersionFlag `help:"Print the version and exit."`
	Serve      serveCmd         `cmd:"" help:"Run the gateway."`
	Keys       keysCmd          `cmd:"" help:"Create, list and revoke API keys."`
	Credits    creditsCmd       `cmd:"" help:"Add and show prepaid credits."`
	Usage      usageCmd         `cmd:"" help:"Report usage of an account (as GET /svc/v1/usage)."`
	Generation generationCmd    `cmd:"" help:"Show one generation record (as GET /svc/v1/generation)."`
	Config     configCmd        `cmd:"" help:"Work with configuration files."`
	Backup     backupCmd        `cmd:"" help:"Copy the database consistently, even while svcgw serves it."`
}

// env is what a command's Run receives besides its own flags.
type env struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	global *Globals
}

// exitError carries a process exit code through kong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Run parses args and runs the command; it returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	var cli root
	parser, err := kong.New(&cli,
		kong.Name("svcgw"),
		kong.Description("A self-hosted model inference gateway: OpenAI, Anthropic and Gemini wire formats on one host, one key and one SQLite ledger."),
		kong.UsageOnError(),
		kong.DefaultEnvars("SVCGW"),
		kong.Vars{"version": version()},
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(exitError{c}) }),
	)
	if err != nil {
		fmt.Fprintln(stderr, "svcgw:", err)
		return 2
	}
	defer func() {
		// kong.Exit panics so that --help and --version return here
		// instead of ending the process.
		if v := recover(); v != nil {
			ee, ok := v.(exitError)
			if !ok {
				panic(v)
			}
			code = ee.code
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		parser.Errorf("%s", err)
		return 2
	}
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, global: &cli.Globals}
	if err := kctx.Run(e); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "svcgw:", err)
		return 1
	}
	return 0
}

// openStore opens the database named by --db.
func (e *env) openStore() (*store.Store, error) {
	st, err := store.Open(e.ctx, e.global.DB, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", e.global.DB, err)
	}
	return st, nil
}

// account looks an account up by name, naming it in the error.
func (e *env) account(st *store.Store, name string) (store.Account, error) {
	acct, err := st.AccountByName(e.ctx, name)
	if err != nil {
		return store.Account{}, fmt.Errorf("account %q: %w", name, err)
	}
	return acct, nil
}
