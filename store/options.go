package store

import (
	"io"
	"log/slog"
	"time"
)

// Options configures a database, on either engine. The zero value is
// usable.
type Options struct {
	// Now is the clock every stored time comes from; default time.Now.
	Now func() time.Time
	// BatchSize is the most generations committed in one ledger
	// transaction; default 256 (1024 on PostgreSQL). On SQLite, 8,192 or
	// more make a bulk writer (a bulk load): its writer gets a page cache
	// of 256 bytes a generation of a batch (store/sqlite/bulkwriter.go).
	BatchSize int
	// BatchInterval is how long the ledger writer waits for a batch to fill
	// before it commits what it has; default 20ms.
	// Nobody waits for it (a Sync commits at once), so it only trades
	// commits per second, which cost CPU at any load, against what a
	// crash can lose and the size of each commit.
	BatchInterval time.Duration
	// QueueSize is how many answered generations may wait for the ledger
	// before it counts as backed up, and CheckLedger refuses billable calls
	// until it has caught up; default 4096 (16384 on PostgreSQL).
	// RecordGeneration never blocks.
	QueueSize int
	// CommitTimeout bounds one ledger commit, waiting for the database's
	// write lock included; default 5s. A commit that does not finish in
	// time fails and is retried, and CheckLedger refuses billable calls
	// from then until a commit succeeds.
	CommitTimeout time.Duration
	// RetryInterval is the longest wait between attempts to commit
	// generations the database failed to take; default 1s. The first retry
	// comes after 50ms, and each wait doubles up to it.
	RetryInterval time.Duration
	// CloseTimeout is how long Close keeps trying to commit what is queued
	// when the database fails; default 10s. Generations still not
	// committed then are logged one by one and counted in Close's error.
	CloseTimeout time.Duration
	// QueryTimeout bounds each read on a request's path (authenticating a
	// key not in the cache, reading a budget or an account, loading spend,
	// looking a generation up); default 5s. A read past it, or one that
	// finds the database locked, fails with ErrUnavailable.
	QueryTimeout time.Duration
	// CommitHook, when set, is called in every ledger transaction just
	// before it commits, and an error it returns fails that commit as a
	// database error would (the transaction is rolled back). It is a test
	// seam, for injecting faults.
	CommitHook func() error
	// OnCommit, when set, is called by the ledger writer after each commit
	// attempt, with its rows, duration and error (metrics). It runs on the
	// writer's goroutine: it must return quickly.
	OnCommit func(LedgerCommit)
	// Readers is the size of the read-only connection pool of account
	// endpoints and commands; default 4.
	Readers int
	// ReaderIdleTime is how long a connection of that pool stays open
	// unused; default 1 minute, negative keeps them open. Each holds a page
	// cache of up to 2,000 KiB of the pages its reports read (~4 MB in
	// modernc's allocator), which closing it gives back: after a burst of
	// reports on four connections, 12 of the 24 MB they had taken
	// (bench/RESULTS.md, "The peak of (d): SQLite's caches and the
	// process's fixed memory"). Reopening one costs the next report
	// ~0.4 ms. SQLite only; the call path's pool (CallReaders) stays open,
	// so a call never waits for a connection to open.
	ReaderIdleTime time.Duration
	// CallReaders is the size of a second read-only pool, kept for the
	// reads of the call path (authenticating a key not in the cache,
	// refreshing a budget, loading spend), so that account reads, however
	// many, never make a call wait for a connection; default 2.
	CallReaders int
	// Rand is the source of key ids and secrets; default crypto/rand.Reader.
	Rand io.Reader
	// Logger receives ledger-writer failures and the start and end of a
	// migration that takes long on a large ledger; default discards.
	Logger *slog.Logger
	// Existing makes Dial and the engines' Open refuse, with ErrNoDatabase, a
	// database svcgw has not created, instead of creating it: the admin
	// commands set it, so that one run against the wrong --db leaves no
	// empty ledger behind.
	Existing bool
	// AuthCacheTTL is how long a key revoked or re-limited by another
	// process (the CLI, another instance) may go on being accepted as it
	// was: Authenticate reads the count of key changes at least this
	// often while calls come, and the keys themselves once a minute (see
	// authCache). 0 means DefaultAuthCacheTTL; negative disables the
	// cache.
	AuthCacheTTL time.Duration
	// LeaseTTL is, on PostgreSQL, how long a balance lease holds without
	// its instance's heartbeat (every third of it): what a crashed
	// instance held comes back to the others this long after its last
	// heartbeat. 0 means postgres.DefaultLeaseTTL. SQLite ignores it.
	LeaseTTL time.Duration
	// Checkpoint is where the write-ahead log is copied back into the
	// database file: sqlite.CheckpointInCommit ("" too),
	// sqlite.CheckpointAfterCommit or sqlite.CheckpointAside
	// (store/sqlite/checkpoint.go). PostgreSQL ignores it.
	Checkpoint string
}

// OrDefault is d, or def when d is not positive.
func OrDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
