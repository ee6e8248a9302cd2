package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
)

// Checkpoints of a bulk writer: the one place where the store schedules
// WAL checkpoints itself.
//
// SQLite's writer connection checkpoints the WAL on its own, inside the
// COMMIT that takes the WAL past 1,000 pages (wal_autocheckpoint). Serving,
// with batches of BatchSize 256, that is every few thousand calls, and it
// stays so. A store whose batches may hold bulkBatchRows generations or
// more (a bulk load such as bench/seed's, 131,072 a batch) goes past it at
// every commit, and each of those checkpoints (copying the batch's pages
// from the WAL into the database file, then syncing it) held its writer
// for 4% of its CPU and its fsyncs. Such a store turns the writer's own
// checkpoints off and runs them on a connection of their own after each
// commit (PASSIVE: it never waits for, nor blocks, the writer or a
// reader), while the writer goes on with the next batch on another core.
// The WAL still restarts from its beginning once a checkpoint has caught
// up, so it stays about a batch long.

// bulkBatchRows is the smallest BatchSize that makes a bulk writer: one
// with a page cache sized for its batches (writerCachePragma) and its own
// checkpointer.
const bulkBatchRows = 8192

// bulkWriter reports whether a store with batches of up to batchSize
// generations is a bulk writer.
func bulkWriter(batchSize int) bool { return batchSize >= bulkBatchRows }

// writerPragmas are the DSN pragmas of the writer connection for its batch
// size, beyond those of every writer.
//
// A bulk writer's page cache holds writerCacheBytesPerRow a generation of
// its batch, so that the pages a commit writes (the rows, the insertion
// points of the table and its indexes, the roll-up rows it updates) stay in
// the cache until it commits. With SQLite's default 2 MB the cache spills
// dirty pages into the WAL in the middle of the transaction and reads them
// back when the commit touches them again: seeding in batches of 131,072
// calls, twice the read and a third more write system calls
// (bench/RESULTS.md, session 4). The cache is allocated as pages are
// used, never in advance; stores with ordinary batches (serving) keep
// SQLite's defaults, so their memory is what it was.
func writerPragmas(batchSize int) string {
	if !bulkWriter(batchSize) {
		return ""
	}
	return fmt.Sprintf("&_pragma=cache_size(-%d)&_pragma=wal_autocheckpoint(0)", batchSize*writerCacheBytesPerRow/1024)
}

// writerCacheBytesPerRow is a bulk writer's page cache per generation of its
// largest batch: a committed call takes ~290 bytes on disk, most of them
// new pages that go to the WAL at the commit anyway.
const writerCacheBytesPerRow = 256

// checkpointer runs a bulk writer's WAL checkpoints on its own connection.
type checkpointer struct {
	db   *sql.DB
	kick chan struct{} // capacity 1: a commit since the last checkpoint
	done chan struct{}
	log  *slog.Logger
}

// openCheckpointer opens the checkpointer of the database at path and
// starts it.
func openCheckpointer(path string, log *slog.Logger) (*checkpointer, error) {
	db, err := sql.Open("sqlite", path+"?"+dsnPragmas)
	if err != nil {
		return nil, fmt.Errorf("open checkpointer: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), done: make(chan struct{}), log: log}
	go c.run()
	return c, nil
}

// committed tells the checkpointer that the writer committed. It never
// blocks: commits made while a checkpoint runs make one more after it.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for range c.kick {
		// busy is 1 when the checkpoint could not run at all (another one
		// was running); frames it could not copy for a reader still on
		// them are copied by a later one, as with SQLite's own.
		var busy, frames, copied int
		err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
		if err != nil {
			c.log.Warn("ledger: WAL checkpoint failed; the next commit tries again", "error", err)
		}
	}
}

// close stops the checkpointer; call it once the writer has stopped
// committing. The writer connection, closed last, checkpoints what is
// left.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	close(c.kick)
	<-c.done
	return c.db.Close()
}
