// Package sqlite is svcgw's SQLite engine (see store): one database file,
// the embedded default, for one svcgw serve. Store implements store.Engine
// and store.DB over the policy it embeds; importing the package registers
// it for store.Dial, for every DSN that is not a URL.
//
// The database is opened with modernc.org/sqlite (no cgo) in WAL mode. The
// Store holds one writer connection (every write is serialised through it,
// with BEGIN IMMEDIATE) and separate pools of read-only connections (the
// account reads', the call path's), so readers never wait for the ledger
// and the ledger never waits for readers. WAL mode with synchronous=NORMAL
// survives a killed process without corruption; a power loss may also lose
// the last commits, never consistency. (A bulk writer, such as
// bench/seed's, runs its load with synchronous=OFF, which a power loss
// during the load can corrupt: such a database is refused until loaded
// again; see bulkwriter.go.)
//
// Spend is kept in memory (spend.go): it is exact only while one Store (one
// svcgw serve) records generations for a database, which LockServe makes
// sure of; other processes (the CLI) may add credits, set caps and create
// keys. What only SQLite has is here too: WAL checkpoints (checkpoint.go),
// the bulk writer, the backfill of roll-ups for a database an older svcgw
// made (backfill.go), Backup, the usage feed (FollowUsage), the commit's
// yields (yield.go) and the serve lock (lock.go).
//
// The Store's file: its connections, migrations and the engine methods the
// policy calls; its ledger batch is in ledger.go.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/svcgw/svcgw/store"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is svcgw's SQLite database, the embedded default (see DB). It is
// safe for concurrent use.
type Store struct {
	store.Policy
	path string
	w    *sql.DB // the one writer connection
	r    *sql.DB // read-only pool: account endpoints and commands
	call *sql.DB // read-only pool of the call path (see Options.CallReaders)
	// keyStmt and budgetStmt are the call path's reads (readKey, Budget),
	// prepared once on call (database/sql prepares them on each of its
	// connections as it first uses one): parsing the key read took about
	// as long as running it, for every call whose key's cache entry had
	// expired (with many keys, most calls).
	keyStmt, budgetStmt *sql.Stmt
	// changesStmt reads the count of key changes (checkKeyChanges).
	changesStmt *sql.Stmt
	// ckpt is the ledger writer's checkpoint (nil: SQLite's own, in the
	// commit; checkpoint.go).
	ckpt *checkpointer
	// bulk is a bulk writer's load in progress, which Close completes
	// (bulkwriter.go); nil for every other store.
	bulk *bulkLoad

	spend spendTracker // charges per account and key, queued ones included

	upkeep store.UpkeepState
	// feed tells each commit's roll-up sums to the usage answers kept
	// (FollowUsage).
	feed usageFeed

	// stmts are the ledger's prepared statements, by text; owned by the
	// ledger goroutine.
	stmts map[string]*sql.Stmt
	// bulkInserts counts the INSERTs a bulk writer ran on the driver
	// connection (bulkInsert); the ledger goroutine's, for tests.
	bulkInserts int
	// args are the ledger's INSERT parameters and bulkIns a bulk writer's
	// 1,024-row INSERTs, reused between batches; the ledger goroutine's.
	args    []any
	bulkIns bulkInsert
	// rollups writes each batch's roll-up sums; the ledger goroutine's.
	rollups rollupWriter

	closeOnce sync.Once
	closeErr  error
}

// DefaultReaderIdleTime is Options.ReaderIdleTime's default.
const DefaultReaderIdleTime = time.Minute

// readerIdleTime is the account readers' idle time as
// sql.DB.SetConnMaxIdleTime takes it (0: no limit).
func readerIdleTime(o store.Options) time.Duration {
	switch {
	case o.ReaderIdleTime == 0:
		return DefaultReaderIdleTime
	case o.ReaderIdleTime < 0:
		return 0
	}
	return o.ReaderIdleTime
}

// servingCacheKiB is the page cache of a serving store's writer
// connection: a quarter of SQLite's default 2,000 KiB, ~117 pages of 4 KiB.
// Each page and SQLite's header for it (~4.3 KB) take an 8 KiB slot of
// modernc's allocator, so the default cache is ~3.8 MB resident once a few
// thousand calls are recorded, and this one ~1 MB. What the commit then
// reads from the OS's page cache instead (bench/RESULTS.md, "The peak of (d):
// SQLite's caches and the process's fixed memory", 20 generations
// of 1,000 keys a commit, 2M-call ledgers): on one account,
// 12.5 reads a generation instead of 4.5; on 200 accounts, whose working
// set no such cache holds, 32.9 instead of 29.2. A read costs ~0.4 µs,
// the generation's commit (its roll-ups included) 120-270 µs: ~1-3%. The
// writer's SQLite memory on that ledger: 2.6 MB instead of 6.0. Below
// 512 KiB the memory hardly falls further (2.0 MB at 256 KiB) and the
// reads keep rising (14.0 and 38.1).
const servingCacheKiB = 512

// dsnPragmas are applied to every connection. busy_timeout comes first so
// the others wait for a lock instead of failing.
const dsnPragmas = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"

// Open opens (creating if needed) the database at path, checks that it is
// in WAL mode, applies any pending migrations and starts the ledger writer.
// Close the Store when done.
func Open(ctx context.Context, path string, opts store.Options) (*Store, error) {
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") {
		// The driver splits its DSN at the first '?', and a file: URI would
		// bypass the pragmas below.
		return nil, fmt.Errorf("open store %q: %w: want a plain file path", path, store.ErrInvalid)
	}
	if opts.Existing {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open store %s: %w", path, store.ErrNoDatabase)
		}
	}
	if err := checkBulkLoad(path); err != nil {
		return nil, err
	}
	s := &Store{path: path}
	s.Init(opts, s, sqliteCharges{s})
	readers := opts.Readers
	if readers <= 0 {
		readers = 4
	}

	ckptDSN, err := checkpointDSN(opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	s.w, err = sql.Open("sqlite", path+"?"+dsnPragmas+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)&_txlock=immediate"+
		ckptDSN+writerPragmas(s.BatchSize(), opts.Checkpoint))
	if err != nil {
		return nil, fmt.Errorf("open writer: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := checkWAL(ctx, s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open writer: %w", err)
	}
	ms, err := sqliteMigrations()
	if err != nil {
		s.w.Close()
		return nil, err
	}
	if err := store.Migrate(ctx, sqliteMigrator{s.w}, ms, s.Now, s.Logger()); err != nil {
		s.w.Close()
		return nil, err
	}
	if err := s.loadBackfillState(ctx, s.w); err != nil {
		s.w.Close()
		return nil, err
	}

	// Readers are opened after the writer has put the file in WAL mode
	// (which persists), and query_only makes an accidental write an error.
	s.r, err = sql.Open("sqlite", path+"?"+dsnPragmas+"&_pragma=query_only(1)")
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open readers: %w", err)
	}
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	s.r.SetConnMaxIdleTime(readerIdleTime(opts))
	if err := checkWAL(ctx, s.r); err != nil {
		s.r.Close()
		s.w.Close()
		return nil, fmt.Errorf("open readers: %w", err)
	}
	if s.call, err = openCallReaders(ctx, path, opts.CallReaders); err != nil {
		s.r.Close()
		s.w.Close()
		return nil, err
	}
	if s.keyStmt, err = s.call.PrepareContext(ctx, store.KeySQL); err == nil {
		if s.budgetStmt, err = s.call.PrepareContext(ctx, store.BudgetSQL); err == nil {
			s.changesStmt, err = s.call.PrepareContext(ctx, store.KeyChangesSQL)
		}
	}
	if err != nil {
		s.call.Close()
		s.r.Close()
		s.w.Close()
		return nil, fmt.Errorf("open call readers: prepare: %w", err)
	}
	// abandon closes what Open has opened so far.
	abandon := func() {
		s.keyStmt.Close()
		s.budgetStmt.Close()
		s.changesStmt.Close()
		s.call.Close()
		s.r.Close()
		s.w.Close()
		s.ckpt.close() // nil until opened
	}
	if s.ckpt, err = openCheckpointer(path, opts.Checkpoint); err != nil {
		abandon()
		return nil, err
	}
	s.SetAfterCommit(s.maybeCheckpoint)
	if store.BulkWriter(s.BatchSize()) {
		if s.bulk, err = beginBulkLoad(ctx, path, s.w); err != nil {
			abandon()
			return nil, err
		}
	}

	s.StartLedger()
	return s, nil
}

// Path is the database file the Store was opened on.
func (s *Store) Path() string { return s.path }

// checkWAL verifies that the connection really is in WAL mode: SQLite
// silently keeps another mode when WAL is impossible (an in-memory database,
// some network file systems).
func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	return nil
}

// Close stops accepting generations, waits for the ledger writer to commit
// everything already queued, and closes the database. If the database
// fails, the writer keeps retrying for CloseTimeout; generations it still
// cannot commit are then logged one by one, with every column, and Close
// reports how many. A bulk writer's Close also makes the load durable and
// marks it finished (bulkwriter.go), only when everything before succeeded.
// It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopUpkeep() // before the writer connection goes away
		errs := []error{s.StopLedger()}
		for _, st := range s.stmts {
			errs = append(errs, st.Close())
		}
		errs = append(errs, s.keyStmt.Close(), s.budgetStmt.Close(), s.changesStmt.Close(), s.call.Close(), s.r.Close())
		if s.bulk != nil {
			errs = append(errs, s.bulk.checkpoint(s.w)) // with the writer the last connection
		}
		// The checkpointer's file on the WAL index is closed once SQLite's
		// connections are: closing any descriptor of a file drops the
		// process's POSIX locks on it, SQLite's among them.
		errs = append(errs, s.w.Close(), s.ckpt.close())
		if s.bulk != nil && errors.Join(errs...) == nil {
			errs = append(errs, s.bulk.finish())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// sqliteDialect is SQLite's (see dialect).
var sqliteDialect = store.Dialect{Name: "sqlite", KeyOrder: "k.rowid"}

func (s *Store) Dialect() store.Dialect { return sqliteDialect }

// Readers is the pool of account reads and commands.
func (s *Store) Readers() store.Conn { return sqlConn{s.r} }

func (s *Store) ReadErr(ctx context.Context, err error) error { return readErr(ctx, err) }

// WriteTx runs fn in a transaction on the writer connection (BEGIN
// IMMEDIATE: it holds the database's write lock from the start), and
// commits it when fn returns nil. what names the change in errors.
func (s *Store) WriteTx(ctx context.Context, what string, fn func(tx store.Conn) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(sqlConn{tx}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// KeyChanges reads the count of key changes (see authCache).
func (s *Store) KeyChanges(ctx context.Context) (int64, error) {
	var n int64
	err := s.changesStmt.QueryRowContext(ctx).Scan(&n)
	return n, readErr(ctx, err)
}

// BudgetRow reads BudgetSQL for the account, with the statement prepared
// on the call path's pool.
func (s *Store) BudgetRow(ctx context.Context, accountID int64) store.Scanner {
	return s.budgetStmt.QueryRowContext(ctx, accountID)
}

// ActiveKey reads the active key whose secret hashes to hash.
func (s *Store) ActiveKey(ctx context.Context, hash string) (store.Key, error) {
	k, err := store.ScanKey(s.keyStmt.QueryRowContext(ctx, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Key{}, store.ErrNotFound
	}
	return k, readErr(ctx, err)
}

// sqliteMigrations are SQLite's migrations (store/sqlite/migrations), in order.
func sqliteMigrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationFiles, "migrations")
}

// sqliteMigrator runs migrations on db, each in an immediate transaction
// (the writer's _txlock), so that two processes opening the same new file
// take turns.
type sqliteMigrator struct{ db *sql.DB }

func (m sqliteMigrator) BeginMigration(ctx context.Context) (store.MigrationTx, error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	return sqliteMigrationTx{tx}, nil
}

type sqliteMigrationTx struct{ tx *sql.Tx }

func (t sqliteMigrationTx) QueryInt(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = t.tx.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

func (t sqliteMigrationTx) Exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

func (t sqliteMigrationTx) Commit(context.Context) error { return t.tx.Commit() }
func (t sqliteMigrationTx) Rollback(context.Context)     { t.tx.Rollback() }

// callReaderCacheKiB is the page cache of each call-path reader, an eighth
// of SQLite's default. What the call path reads again soon (a key, its
// account's budget) is a few pages; what fills a default cache is each
// key's first spend load, a range of spend_daily read once and then kept
// in memory (spendTracker). On a 2M-call ledger of 1,000 keys, after
// authenticating each key and loading its spend and budget, the reader
// held 0.5 MB of SQLite's memory instead of 4.5, and the CPU of those
// reads was the same (143-176 against 147-153 µs a key the first time,
// 39 against 38-45 µs after; bench/RESULTS.md, "The peak of
// (d): SQLite's caches and the process's fixed memory").
const callReaderCacheKiB = 256

// openCallReaders opens the call path's read-only pool of n connections
// (default 2). The call path reads rarely in steady state (keys and budgets
// are cached, spend is kept in memory), but a read it does make must never
// queue behind an account report.
func openCallReaders(ctx context.Context, path string, n int) (*sql.DB, error) {
	if n <= 0 {
		n = 2
	}
	db, err := sql.Open("sqlite", path+"?"+dsnPragmas+"&_pragma=query_only(1)"+
		fmt.Sprintf("&_pragma=cache_size(-%d)", callReaderCacheKiB))
	if err != nil {
		return nil, fmt.Errorf("open call-path readers: %w", err)
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := checkWAL(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open call-path readers: %w", err)
	}
	return db, nil
}

// readErr marks err, from a read run under ReadCtx, as ErrUnavailable when
// the read ran out of time or found the database locked: the caller may
// retry later. A caller's own cancellation stays what it is.
func readErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.Is(context.Cause(ctx), store.ErrQueryTimeout) ||
		errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// Pools reports each connection pool's statistics: connections in use and
// idle, and how often and how long callers waited for one.
func (s *Store) Pools() []store.Pool {
	return []store.Pool{
		{Name: "writer", DBStats: s.w.Stats()},
		{Name: "readers", DBStats: s.r.Stats()},
		{Name: "call_readers", DBStats: s.call.Stats()},
	}
}

// Admission returns the Store itself: one process serves a SQLite file.
func (s *Store) Admission() store.Admitter { return s }

// Instances is 1: one svcgw serve per SQLite file.
func (s *Store) Instances() int { return 1 }
