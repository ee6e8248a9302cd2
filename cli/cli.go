// Package cli is svcgw's command line: serve, init, keys, credits, usage,
// generation, backup and config, as a kong grammar with one command per file.
// Commands write only to the writers Run is given. Only serve and init
// create a database; the others open an existing one.
//
// The environment is read by one rule, so that a variable set for one
// command never changes what another does: settings that mean the same
// thing for every command have one name everywhere (SVCGW_DB, SVCGW_DB_FILE,
// SVCGW_CONFIG, SVCGW_LOG_LEVEL, SVCGW_LOG_FORMAT); every other flag of serve is read as
// SVCGW_SERVE_<FLAG> (SVCGW_SERVE_RPM); the flags of the other commands
// (init, keys, credits, usage, generation, backup, config) come from the command
// line only.
//
// cli may import server, store, config and the account surface (for the
// exact JSON shapes of usage and generation); nothing imports cli but main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
)

// Globals are the flags every command shares.
type Globals struct {
	DB     string `name:"db" env:"SVCGW_DB" placeholder:"FILE|URL" help:"The database: a SQLite file (default svcgw.db), or a postgres:// URL for a PostgreSQL database that several svcgw serve instances share. Its password may instead come from PGPASSWORD or a PGPASSFILE (~/.pgpass), or the whole URL from --db-file."`
	DBFile string `name:"db-file" env:"SVCGW_DB_FILE" type:"existingfile" placeholder:"FILE" help:"Read --db from this file, which holds the URL (or path) alone: a PostgreSQL password kept out of the command line and the environment, e.g. in a mounted Kubernetes Secret or a systemd credential."`
}

// defaultDB is --db when neither it nor --db-file is given.
const defaultDB = "svcgw.db"

// AfterApply reads --db-file, and expands a SQLite path as kong's path
// type would (a postgres:// URL must not be turned into a file path).
func (g *Globals) AfterApply() error {
	switch {
	case g.DBFile != "" && g.DB != "":
		return errors.New("--db (or SVCGW_DB) and --db-file (or SVCGW_DB_FILE) name the database twice: give one")
	case g.DB == "" && g.DBFile == "":
		g.DB = defaultDB
	case g.DBFile != "":
		b, err := os.ReadFile(g.DBFile)
		if err != nil {
			return fmt.Errorf("--db-file: %w", err)
		}
		g.DB = strings.TrimSpace(string(b))
		if g.DB == "" || strings.ContainsAny(g.DB, "\r\n") {
			return fmt.Errorf("--db-file %s: want one line, the database's postgres:// URL (or SQLite path)", g.DBFile)
		}
	}
	if !postgres.IsDSN(g.DB) {
		g.DB = kong.ExpandPath(g.DB)
	}
	return nil
}

// where names the database in messages, its password redacted.
func (g *Globals) where() string { return store.Redact(g.DB) }

// root is the whole grammar.
type root struct {
	Globals
	Version    kong.VersionFlag `help:"Print the version and exit."`
	Serve      serveCmd         `cmd:"" help:"Run the gateway (creating the database on its first start)."`
	Init       initCmd          `cmd:"" help:"Create the database without serving, e.g. to create keys before the first start."`
	Keys       keysCmd          `cmd:"" help:"Create, list and revoke API keys."`
	Credits    creditsCmd       `cmd:"" help:"Add and show prepaid credits."`
	Usage      usageCmd         `cmd:"" help:"Report usage of an account (as GET /svc/v1/usage)."`
	Generation generationCmd    `cmd:"" help:"Show one generation record (as GET /svc/v1/generation)."`
	Config     configCmd        `cmd:"" help:"Work with configuration files."`
	Backup     backupCmd        `cmd:"" help:"Copy the database consistently, even while svcgw serves it."`
	DB         dbCmd            `cmd:"" name:"db" help:"Move a ledger from SQLite to PostgreSQL."`
	Admin      adminCmd         `cmd:"" help:"Manage the admin tokens of the management API (/admin/v1 on --admin-addr)."`
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

// newParser builds the grammar around cli.
func newParser(cli *root, stdout, stderr io.Writer) (*kong.Kong, error) {
	return kong.New(cli,
		kong.Name("svcgw"),
		kong.Description("A self-hosted model inference gateway: OpenAI, Anthropic and Gemini wire formats on one host, one key and one SQLite ledger."),
		kong.UsageOnError(),
		serveEnvars(),
		kong.Vars{"version": readBuild().String()},
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(exitError{c}) }),
	)
}

// serveEnvars names the environment variable of every serve flag that has
// none of its own SVCGW_SERVE_<FLAG>, so a flag added to serve follows the
// package's rule without a tag. (kong.DefaultEnvars would give every
// command's flags, and --version, a shared SVCGW_<FLAG>.)
func serveEnvars() kong.Option {
	return kong.PostBuild(func(k *kong.Kong) error {
		for _, n := range k.Model.Children {
			if n.Name != "serve" {
				continue
			}
			for _, f := range n.Flags {
				if len(f.Envs) > 0 || f.Name == "help" {
					continue
				}
				name := "SVCGW_SERVE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
				f.Envs = []string{name}
				f.Value.Tag.Envs = []string{name}
			}
		}
		return nil
	})
}

// Run parses args and runs the command; it returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	var cli root
	parser, err := newParser(&cli, stdout, stderr)
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
	if noCommand(args) {
		// svcgw alone (or with --db only) is asking what it can do.
		args = append(args, "--help")
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		parser.Errorf("%s", err)
		return 2
	}
	// Every change a command makes is recorded in the audit log as the
	// command line's, as the management API records its token's name.
	e := &env{ctx: store.WithActor(ctx, store.ActorCLI), stdout: stdout, stderr: stderr, global: &cli.Globals}
	// The admin commands take the existing database (store.DB) as an
	// argument of Run: it is opened once, when a command asks for it, and
	// closed after the command.
	var opened store.DB
	if err := kctx.BindSingletonProvider(func() (store.DB, error) {
		st, err := e.openStore()
		opened = st
		return st, err
	}); err != nil {
		fmt.Fprintln(stderr, "svcgw:", err)
		return 2
	}
	err = kctx.Run(e)
	if opened != nil {
		err = errors.Join(err, opened.Close())
	}
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "svcgw:", message(err))
		return 1
	}
	return 0
}

// message is err as the command line says it: an *llm.Error in it (the
// amount and limit parsers', which the API shares) in its own words,
// without its kind, which is an API error code.
func message(err error) string {
	s := err.Error()
	var le *llm.Error
	if errors.As(err, &le) {
		plain := le.Message
		if le.Err != nil {
			plain += ": " + le.Err.Error()
		}
		s = strings.Replace(s, le.Error(), plain, 1)
	}
	return s
}

// checkDir returns an error naming the directory of a SQLite file that
// does not exist (or is no directory): SQLite, the serve lock and a
// backup's partial file otherwise fail with messages that name another
// cause (a server holding the lock, "unable to open database file"). flag
// is what the path was given as. svcgw creates files, never directories:
// a mistyped path must not leave a tree behind.
func checkDir(path, flag string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: the directory %s does not exist; create it first (mkdir -p %s) or give another path", flag, path, dir, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// checkDBDir is checkDir for --db, when it is a SQLite file.
func (e *env) checkDBDir() error {
	if postgres.IsDSN(e.global.DB) {
		return nil
	}
	return checkDir(e.global.DB, "--db")
}

// noCommand reports whether args name no command: nothing but the global
// --db or --db-file (the flags that take a value before a command).
func noCommand(args []string) bool {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--db" || a == "--db-file":
			i++ // its value
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "--db-file="):
		default:
			return false
		}
	}
	return true
}

// openStore opens the existing database named by --db, for an admin
// command. Only serve and init create one: a command run in the wrong
// directory, or against the wrong server, must not leave an empty ledger
// behind, nor fund one nobody serves.
func (e *env) openStore() (store.DB, error) {
	if err := e.checkDBDir(); err != nil {
		return nil, err
	}
	st, err := store.Dial(e.ctx, e.global.DB, store.Options{Existing: true})
	if errors.Is(err, store.ErrNoDatabase) {
		return nil, fmt.Errorf("no database at %s: point at svcgw serve's database with --db or SVCGW_DB "+
			"(svcgw serve creates one on its first start, svcgw init without serving)", e.global.where())
	}
	if err != nil {
		return nil, e.openError(err)
	}
	return st, nil
}

// openError words a failure to open --db: the store's errors for
// PostgreSQL name the (redacted) URL already.
func (e *env) openError(err error) error {
	if postgres.IsDSN(e.global.DB) {
		return err
	}
	return fmt.Errorf("open %s: %w", e.global.where(), err)
}

// createStore opens the database named by --db with opts, creating and
// migrating it if needed.
func (e *env) createStore(opts store.Options) (store.DB, error) {
	if err := e.checkDBDir(); err != nil {
		return nil, err
	}
	st, err := store.Dial(e.ctx, e.global.DB, opts)
	if err != nil {
		return nil, e.openError(err)
	}
	return st, nil
}

// account looks an account up by name.
func (e *env) account(st store.DB, name string) (store.Account, error) {
	acct, err := st.AccountByName(e.ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Account{}, fmt.Errorf("account %q not found in %s (keys create --account %s creates it)", name, e.global.where(), name)
	}
	return acct, err // the store's error names the account
}

// keyError words a key lookup's failure for the command line.
func (e *env) keyError(keyID string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("key %s not found in %s (keys list shows the keys)", keyID, e.global.where())
	}
	return err // the store's error names the key
}
