// Package postgres is svcgw's PostgreSQL engine (see store): a database
// that several svcgw serve instances share. Store implements store.Engine
// and store.DB over the policy it embeds, and adds what several writers
// need: balance leases (Admission, lease.go) and the live instances the
// rate limits are shared among (Instances). Importing the package
// registers it for store.Dial, for postgres:// and postgresql:// URLs.
// CopyFromSQLite copies a SQLite database into an empty one (svcgw db
// copy).
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/svcgw/svcgw/store"
)

// Store is svcgw's database on a PostgreSQL server, which several svcgw
// serve instances may share (see DB; docs/ledger.md, "Several instances on
// PostgreSQL", has the design). It is safe for concurrent use.
//
// It keeps the ledger the SQLite Store keeps, with the same batched writer
// (a batch of generations, their debits, spend and roll-ups are one
// transaction, sent to the server in one round trip), and it adds what
// several writers need: balance leases (Admission), through which each
// instance admits calls without asking the database, and the count of
// live instances the rate limits are shared among (Instances). Its
// connections come from three pgx pools of fixed size: the ledger writer
// and other writes (2), account reads and commands (Options.Readers, 4)
// and the call path, lease grants and the heartbeat (Options.CallReaders,
// 2), plus the connection that holds the instance's liveness lock and
// listens for its peers' requests (lease_peers.go): at most 9
// connections per instance.
type Store struct {
	store.Policy
	dsn  string // redacted
	w    *pgxpool.Pool
	r    *pgxpool.Pool
	call *pgxpool.Pool

	leases *leases
	refs   ledgerRefs // the ledger writer's

	upkeep    store.UpkeepState
	closeOnce sync.Once
	closeErr  error
}

//go:embed migrations/*.sql
var pgMigrationFiles embed.FS

// pgWritePool is the writer pool's size: the ledger writer, and one more
// connection for other writes (credits, keys, feedback, upkeep).
const pgWritePool = 2

// Open connects to the PostgreSQL database dsn names (a postgres://
// or postgresql:// URL, with any libpq parameter pgx accepts), applies any
// pending migrations and starts the ledger writer. Migrations are safe when
// several instances start at once: each runs in a transaction holding an
// advisory lock, and a migration already recorded is skipped. Close the
// store when done.
func Open(ctx context.Context, dsn string, opts store.Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w: %w", store.Redact(dsn), store.ErrInvalid, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "svcgw"
	}
	// A batch costs a round trip and a commit whatever its size, so
	// PostgreSQL takes larger batches, and a longer queue, than SQLite:
	// a server on another machine, or busy with other instances, commits
	// less often.
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1024
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 16384
	}
	p := &Store{dsn: store.Redact(dsn)}
	p.Init(opts, p, pgCharges{p})
	p.leases = newLeases(p, opts.LeaseTTL)
	p.SetRollupsComplete(true) // born with them: nothing to backfill

	pool := func(n int, after func(context.Context, *pgx.Conn) error) (*pgxpool.Pool, error) {
		c := cfg.Copy()
		c.MaxConns = int32(n)
		c.AfterConnect = after
		return pgxpool.NewWithConfig(ctx, c)
	}
	if p.w, err = pool(pgWritePool, p.leases.writerLock(p.writerSession(cfg))); err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", p.dsn, err)
	}
	// The pool connects lazily: connect now, so that a server that does
	// not answer is reported as that, not as the first query's failure.
	if err := p.w.Ping(ctx); err != nil {
		p.w.Close()
		return nil, fmt.Errorf("connect to postgres %s: %w", p.dsn, err)
	}
	if opts.Existing {
		var table *string
		if err := p.w.QueryRow(ctx, `SELECT to_regclass('schema_migrations')::text`).Scan(&table); err != nil {
			p.w.Close()
			return nil, fmt.Errorf("open postgres %s: %w", p.dsn, err)
		}
		if table == nil {
			p.w.Close()
			return nil, fmt.Errorf("open postgres %s: %w", p.dsn, store.ErrNoDatabase)
		}
	}
	ms, err := store.LoadMigrations(pgMigrationFiles, "migrations")
	if err != nil {
		p.w.Close()
		return nil, err
	}
	if err := store.Migrate(ctx, pgMigrator{p.w}, ms, p.Now, p.Logger()); err != nil {
		p.w.Close()
		return nil, fmt.Errorf("open postgres %s: %w", p.dsn, err)
	}
	if p.r, err = pool(cmpOr(opts.Readers, 4), nil); err != nil {
		p.w.Close()
		return nil, fmt.Errorf("open postgres %s: %w", p.dsn, err)
	}
	if p.call, err = pool(cmpOr(opts.CallReaders, 2), nil); err != nil {
		p.r.Close()
		p.w.Close()
		return nil, fmt.Errorf("open postgres %s: %w", p.dsn, err)
	}
	p.StartLedger()
	return p, nil
}

// writerSession returns what the writer pool runs on each new connection.
// The writer's statements are prepared once (pgx caches them per
// connection) and run with the same shape every time: a batch's accounts,
// keys and leases passed as arrays, each table reached by its primary key.
// PostgreSQL would plan the statements that join arrays afresh at every
// commit (a custom plan each time: it cannot tell how long an array is),
// for the same plan; force_generic_plan plans each once per connection.
// It is a session setting, not a startup parameter, so a server that does
// not know it (a PostgreSQL-wire database) still connects: the SET fails
// and is ignored. A DSN that sets plan_cache_mode keeps its own.
func (p *Store) writerSession(cfg *pgxpool.Config) func(context.Context, *pgx.Conn) error {
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; set {
		return nil
	}
	return func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				return err // the connection failed
			}
			p.Logger().Debug("postgres: the server does not take plan_cache_mode; the ledger's statements are planned per commit", "error", err)
		}
		return nil
	}
}

// cmpOr is n, or def when n is not positive.
func cmpOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Path is the database's URL, its password redacted.
func (p *Store) Path() string { return p.dsn }

// Close stops the upkeep and the lease loop, waits for the ledger writer to
// commit what is queued (see Store.Close), gives back this instance's
// leases and rate-limit slices, and closes the pools. It is idempotent.
func (p *Store) Close() error {
	p.closeOnce.Do(func() {
		p.stopUpkeep()
		errs := []error{p.StopLedger(), p.leases.stop()}
		p.call.Close()
		p.r.Close()
		p.w.Close()
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// pgAdvisoryLock is the key of the advisory lock migrations hold (see
// pgMigrator): any number fixed for svcgw ("svcg" in ASCII).
const pgAdvisoryLock = 0x73766367

// pgMigrator runs migrations, each in a transaction holding a
// transaction-scoped advisory lock: instances starting at once take turns,
// and each finds what the others applied.
type pgMigrator struct{ db *pgxpool.Pool }

func (m pgMigrator) BeginMigration(ctx context.Context) (store.MigrationTx, error) {
	tx, err := m.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgAdvisoryLock)); err != nil {
		tx.Rollback(ctx)
		return nil, fmt.Errorf("lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		tx.Rollback(ctx)
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	return pgMigrationTx{tx}, nil
}

type pgMigrationTx struct{ tx pgx.Tx }

func (t pgMigrationTx) QueryInt(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = t.tx.QueryRow(ctx, pgq(q), args...).Scan(&n)
	return n, err
}

func (t pgMigrationTx) Exec(ctx context.Context, q string, args ...any) error {
	if len(args) > 0 {
		q = pgq(q) // a migration's own text is sent as it is
	}
	_, err := t.tx.Exec(ctx, q, args...)
	return err
}

func (t pgMigrationTx) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }
func (t pgMigrationTx) Rollback(ctx context.Context)     { t.tx.Rollback(ctx) }

// PostgreSQL error classes (SQLSTATE's first two characters) that reject
// a row as such: a constraint (class 23) or a value the column cannot hold
// (class 22).
const (
	pgClassData       = "22"
	pgClassConstraint = "23"
)

// Unstorable reports whether err is PostgreSQL rejecting a row as such.
func (p *Store) Unstorable(err error) bool {
	if errors.Is(err, errNoReference) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	class := pe.Code[:2]
	return class == pgClassData || class == pgClassConstraint
}

// FaultReason says in a few words why a ledger commit failed.
func (p *Store) FaultReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "a commit did not finish in time: is the database server overloaded, or a lock held?"
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "53":
			return "the database server is out of a resource (disk, memory or connections)"
		case "57":
			return "the database server is shutting down or cancelled the commit"
		case "40":
			return "the commit conflicted with another transaction"
		case "08":
			return "the connection to the database server failed"
		case "25":
			return "the database is read-only"
		}
		return "the database refused the write"
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) {
		return "the database server cannot be reached"
	}
	return "a commit failed"
}

// ReadErr marks err, from a read run under ReadCtx, as ErrUnavailable when
// the read ran out of time or could not reach the server: the caller may
// retry later. A caller's own cancellation stays what it is.
func (p *Store) ReadErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(context.Cause(ctx), store.ErrQueryTimeout) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if ctx.Err() != nil {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "53", "57":
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// noRows reports whether err is pgx's "no rows in result set".
func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// Pools reports each pgx pool's statistics, as the SQLite store's.
func (p *Store) Pools() []store.Pool {
	stat := func(name string, pl *pgxpool.Pool) store.Pool {
		st := pl.Stat()
		return store.Pool{Name: name, DBStats: sql.DBStats{
			MaxOpenConnections: int(st.MaxConns()),
			OpenConnections:    int(st.TotalConns()),
			InUse:              int(st.AcquiredConns()),
			Idle:               int(st.IdleConns()),
			WaitCount:          st.EmptyAcquireCount(),
			WaitDuration:       st.EmptyAcquireWaitTime(),
		}}
	}
	return []store.Pool{stat("writer", p.w), stat("readers", p.r), stat("call_readers", p.call)}
}
