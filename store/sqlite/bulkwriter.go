package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svcgw/svcgw/store"
)

// A bulk writer: a store whose batches may hold BulkBatchRows generations
// or more (a bulk load such as bench/seed's, 131,072 a batch); svcgw serve
// never makes one.
//
// Its writer connection's page cache holds writerCacheBytesPerRow a
// generation of its batch, so that the pages a commit writes (the rows,
// the insertion points of the table and its indexes, the roll-up rows it
// updates) stay in the cache until it commits. With SQLite's default 2 MB
// the cache spills dirty pages into the WAL in the middle of the
// transaction and reads them back when the commit touches them again:
// seeding in batches of 131,072 calls, twice the read and a third more
// write system calls (bench/RESULTS.md, "Seeding: the ledger writer as a
// bulk writer"). The cache is allocated
// as pages are used, never in advance; stores with ordinary batches
// (serving) have servingCacheKiB.
//
// Its rows go in INSERTs of bulkInsertChunk rows instead of insertChunk:
// a statement journals every page it is the first to change (SQLite's
// statement journal, kept so that a failing statement can be undone alone),
// and the next statement journals the same leaf pages again; with 64-row
// statements that journal was 5% of a seeding's CPU, with 1,024-row ones
// under 3%, and the per-statement work of the driver and database/sql
// shrinks with it (bench/RESULTS.md, "Seeding: the bulk writer's
// statements and checkpoints").
//
// Those INSERTs go to the driver's connection directly (sql.Conn.Raw), its
// parameters in a []driver.NamedValue kept between them: through
// database/sql, each of a statement's 19,456 arguments was checked and
// copied into such a slice again (driverArgsConnLocked, 3–6% of the
// writer's CPU in a seeding; bench/RESULTS.md, "Seeding: the bulk writer
// around database/sql").
//
// Its checkpoints stay SQLite's own, in the COMMIT, but only once the WAL
// has passed bulkCheckpointPages (SQLite's default is 1,000 pages, which
// every bulk commit passes, so each checkpointed): pages that several
// consecutive batches change (the B-trees' interior pages and rightmost
// leaves, the filter indexes' insertion points, the roll-up rows) are
// copied into the database file once instead of once a batch, which took
// the checkpoints from 3.8% of a seeding's CPU to 1.7%. In the other
// checkpoint modes, which turn SQLite's automatic checkpoint off, this is
// left alone. Running them on a connection of their own after each commit
// (tried and taken out again: bench/RESULTS.md, "Seeding: the ledger
// writer as a bulk writer") let the WAL grow without end: the writer
// begins its
// next transaction before such a checkpoint ends, so it never starts on a
// fully checkpointed WAL, which is when SQLite rewinds the WAL (884 MB
// after 3 million calls, and the seeding slower for it).
//
// Its writer runs with synchronous=OFF once Open has set the database up
// (bulkLoad): SQLite then never waits for the disk during the load. In WAL
// mode with synchronous=NORMAL (every other store) a commit does not sync
// either; what a bulk writer leaves out are the two fsyncs of each
// checkpoint, of the WAL before its pages are copied into the database
// file and of the database file after, which the writer waited for inside
// its COMMIT (bench/RESULTS.md, "Seeding: what the bulk writer waits
// for besides its CPU"). The trade, and how it is
// made safe for what a user relies on:
//
//   - A process that dies during the load (kill -9, a panic, the machine's
//     OOM killer) leaves the database as consistent as under NORMAL:
//     everything SQLite wrote is in the operating system's cache, which
//     the file system writes out. Only the operating system crashing or
//     the power failing during the load can leave the file corrupt,
//     since pages may then reach the disk in any order.
//   - So that such a database is never taken for a good one, Open writes
//     and syncs a marker file beside the database (path + "-bulkload")
//     before the first unsynced write, and only Close removes it: after
//     the ledger has committed everything queued, Close sets synchronous
//     back to NORMAL, checkpoints the whole WAL (TRUNCATE: the WAL is
//     synced, copied into the database file, and the file synced, as
//     SQLite's checkpoints do under NORMAL), closes the connections (the
//     WAL file is removed), fsyncs the database file itself, and only then
//     removes the marker and syncs the directory. A database whose Close
//     returned nil is therefore on disk as durably as under NORMAL; one
//     whose load did not finish, however it ended, keeps its marker, and
//     every Open (svcgw serve, the CLI, another bulk load) refuses it with
//     ErrUnfinishedBulkLoad, which says what to do. An interrupted bulk
//     load is run again; it is never half-trusted.
//
// Should database/sql ever replace the writer's connection (after a
// driver.ErrBadConn), the new one has the DSN's synchronous=NORMAL: slower,
// never less safe.
//
// Its batches of bulkInsertChunk rows or more run without SQLite's
// statement journal: a statement that "may abort" in a transaction (one
// whose failure SQLite undoes alone, leaving the transaction open) first
// copies every page it is the first to change into a journal of its own,
// and each 1,024-row INSERT copied the same leaf pages of the table and
// its four indexes again (subjournalPageIfRequired, 2.5–5% of a seeding's
// writer; bench/RESULTS.md, "The ledger writer and seeding"). The
// INSERT into generations
// may abort for two reasons (SQLite's insert.c and fkey.c, read in
// modernc's v1.62.0 lib): its UNIQUE, NOT NULL and CHECK constraints with
// the default ABORT resolution, and its immediate foreign keys (account_id
// and key_id: fkLookupParent marks any multi-row INSERT into a child table
// as may-abort, whatever PRAGMA defer_foreign_keys says). So for such a
// batch:
//
//   - the 1,024-row INSERTs are INSERT OR ROLLBACK: a row that breaks a
//     constraint rolls the whole transaction back at once, which is what
//     the writer does with any failure of a batch anyway (flush then
//     commits it row by row, and drops only the bad rows);
//   - the writer connection runs the batch with PRAGMA foreign_keys=OFF
//     (set before its BEGIN: the pragma does nothing inside a
//     transaction, and turned back on when the batch ends, so that every
//     other write of the store, the row-by-row retry among them, has
//     SQLite's checks), and checkParents checks what the foreign keys
//     would have, once per distinct account and key id of the batch
//     instead of twice a row, in the batch's own transaction: nothing can
//     change between the check and the commit. A missing parent fails the
//     batch as SQLite's check did (unstorable), and the row-by-row retry,
//     foreign keys on, drops exactly the rows that name it.
//
// The smaller INSERTs of the batch's rest and the upserts (spend_daily, the
// roll-ups) keep their statement journal: an upsert's DO UPDATE is coded
// with ABORT whatever its INSERT says (sqlite3UpsertDoUpdate), and its NOT
// NULL columns then make it may-abort.

// writerPragmas are the DSN pragmas of the writer connection for its batch
// size and checkpoint mode, beyond those of every writer: its page cache
// and, for a bulk writer where SQLite checkpoints in the commit, its
// threshold.
func writerPragmas(batchSize int, checkpoint string) string {
	if !store.BulkWriter(batchSize) {
		return fmt.Sprintf("&_pragma=cache_size(-%d)", servingCacheKiB)
	}
	p := fmt.Sprintf("&_pragma=cache_size(-%d)", batchSize*writerCacheBytesPerRow/1024)
	if checkpoint == "" || checkpoint == CheckpointInCommit {
		p += fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", bulkCheckpointPages)
	}
	return p
}

// bulkCheckpointPages is a bulk writer's wal_autocheckpoint: 160 MB of 4 KB
// pages, about four of the seeder's 131,072-call batches. The WAL file
// grows to about that size plus a batch, and is reused after each
// checkpoint as before.
const bulkCheckpointPages = 40000

// bulkInsertChunk is the number of rows a bulk writer's INSERT carries when
// that many are left (19,456 parameters, under SQLite's 32,766); the rest
// go in insertChunk and the smaller chunks, as every store's. Its prepared
// statement holds ~3.5 MB of SQLite's memory on the writer connection.
const bulkInsertChunk = 1024

// writerCacheBytesPerRow is a bulk writer's page cache per generation of its
// largest batch: a committed call takes ~290 bytes on disk, most of them
// new pages that go to the WAL at the commit anyway.
const writerCacheBytesPerRow = 256

// bulkInsert runs a bulk writer's bulkInsertChunk-row INSERTs on the
// writer's driver connection, in the transaction of the batch, which runs on
// conn (begin). The statement is prepared at a batch's first such INSERT
// (2.8 ms, against ~1 s for the batch's 131,072 rows) and finalized at its
// end (end), while the batch still holds the connection: a statement kept
// between batches could outlive its connection, which database/sql closes
// on its own once a statement on it has been interrupted, and finalizing
// it then would touch freed memory.
type bulkInsert struct {
	conn *sql.Conn
	stmt driver.Stmt         // prepared on conn's driver connection; nil until the first INSERT
	args []driver.NamedValue // bulkInsertChunk rows' parameters, kept between batches
	// fkOff is set while conn runs with foreign_keys off (begin to end).
	fkOff bool
}

// begin takes the writer connection of db for a batch and turns its
// foreign keys off (see the top of this file); the batch's transaction
// begins after it.
func (b *bulkInsert) begin(ctx context.Context, db *sql.DB) (err error) {
	if b.conn, err = db.Conn(ctx); err != nil {
		return err
	}
	b.fkOff = true
	if _, err = b.conn.ExecContext(ctx, "PRAGMA foreign_keys=OFF"); err != nil {
		b.end() // the caller ends only a batch that began
	}
	return err
}

// exec inserts rows, bulkInsertChunk of them, in the batch's transaction.
func (b *bulkInsert) exec(ctx context.Context, rows []store.GenRow) error {
	if b.args == nil {
		b.args = make([]driver.NamedValue, bulkInsertChunk*insertColumns)
		for i := range b.args {
			b.args[i].Ordinal = i + 1
		}
	}
	args := b.args[:len(rows)*insertColumns]
	var v [insertColumns]any
	for i := range rows {
		appendValues(v[:0], &rows[i])
		a := args[i*insertColumns : (i+1)*insertColumns]
		for j := range a {
			a[j].Value = v[j]
		}
	}
	defer func() {
		for i := range args {
			args[i].Value = nil // drop references for the GC
		}
	}()
	return b.conn.Raw(func(dc any) error {
		if b.stmt == nil {
			c, ok := dc.(driver.ConnPrepareContext)
			if !ok {
				return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
			}
			st, err := c.PrepareContext(ctx, bulkInsertSQL)
			if err != nil {
				return err
			}
			b.stmt = st
		}
		st, ok := b.stmt.(driver.StmtExecContext)
		if !ok {
			return fmt.Errorf("driver statement %T cannot execute with a context", b.stmt)
		}
		_, err := st.ExecContext(ctx, args)
		return err
	})
}

// end, once the batch's transaction has ended, finalizes the batch's
// statement, turns the connection's foreign keys on again and gives the
// connection back. A connection whose foreign keys cannot be seen on is
// discarded (driver.ErrBadConn): database/sql opens a new one, with the
// DSN's foreign_keys(1), for the writer's next use.
func (b *bulkInsert) end() {
	if b.stmt != nil {
		st := b.stmt
		b.stmt = nil
		_ = b.conn.Raw(func(any) error { return st.Close() }) // a failure leaves nothing to undo
	}
	if b.fkOff {
		b.fkOff = false
		ctx := context.Background()
		on := 0
		_, err := b.conn.ExecContext(ctx, "PRAGMA foreign_keys=ON")
		if err == nil {
			err = b.conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&on)
		}
		if err != nil || on != 1 {
			_ = b.conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		}
	}
	_ = b.conn.Close() // back to db's pool; it reports only a second Close
	b.conn = nil
}

// bulkBatchHook, when set, is called in each bulk batch's transaction
// after its INSERTs: a test seam, for looking at the connection as the
// batch sees it.
var bulkBatchHook func(ctx context.Context, tx *sql.Tx)

// errMissingParent is a bulk batch naming an account or a key that does
// not exist (checkParents): the rows naming it are rejected as such, as a
// foreign key rejects them (Store.unstorable).
var errMissingParent = errors.New("unknown account or key")

// The parents of a bulk batch's rows found in the database: how many of
// the ids in a JSON array (distinct ones) exist.
const (
	accountsFoundSQL = `SELECT COUNT(*) FROM accounts WHERE id IN (SELECT value FROM json_each(?))`
	keysFoundSQL     = `SELECT COUNT(*) FROM api_keys WHERE id IN (SELECT value FROM json_each(?))`
)

// checkParents checks, in the bulk batch's transaction tx, that every
// account and key its rows name exists (what the foreign keys of
// generations, spend_daily and the roll-ups check, which the batch ran
// without). agg holds the batch's sums: its debits name every account of
// the batch, its spend every key.
func (s *Store) checkParents(ctx context.Context, tx *sql.Tx, agg *store.BatchSums) error {
	accts := make([]int64, 0, len(agg.Debits))
	for id := range agg.Debits {
		accts = append(accts, id)
	}
	keys := make(map[string]struct{})
	for k := range agg.Spend {
		if k.Key != "" { // NULL key_id: no key to check
			keys[k.Key] = struct{}{}
		}
	}
	keyList := make([]string, 0, len(keys))
	for k := range keys {
		keyList = append(keyList, k)
	}
	for _, c := range []struct {
		query, what string
		ids         any
		n           int
	}{{accountsFoundSQL, "accounts", accts, len(accts)}, {keysFoundSQL, "keys", keyList, len(keyList)}} {
		if c.n == 0 {
			continue
		}
		ids, err := json.Marshal(c.ids)
		if err != nil {
			return fmt.Errorf("ledger: check %s: %w", c.what, err)
		}
		var found int
		if err := tx.StmtContext(ctx, s.stmts[c.query]).QueryRowContext(ctx, string(ids)).Scan(&found); err != nil {
			return fmt.Errorf("ledger: check %s: %w", c.what, err)
		}
		if found != c.n {
			return fmt.Errorf("ledger: %w: %d of the batch's %d %s not found", errMissingParent, c.n-found, c.n, c.what)
		}
	}
	return nil
}

// ErrUnfinishedBulkLoad means a bulk load into the database did not finish
// (its marker file, path + "-bulkload", is still there): the database may
// be incomplete and, if the operating system crashed or the power failed
// during the load, corrupt. Open refuses it; the error says how to go on.
var ErrUnfinishedBulkLoad = errors.New("unfinished bulk load")

// bulkLoadSuffix names a bulk load's marker file, beside the database.
const bulkLoadSuffix = "-bulkload"

// checkBulkLoad refuses the database at path while the marker of an
// unfinished bulk load is beside it.
func checkBulkLoad(path string) error {
	marker := path + bulkLoadSuffix
	b, err := os.ReadFile(marker)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("open store %s: read %s: %w", path, marker, err)
	}
	return fmt.Errorf("open store %s: %w: %s is there (%s): the bulk load did not finish, "+
		"so the database may be incomplete, and if the system crashed or lost power during it, corrupt "+
		"(a bulk load runs with synchronous=OFF). Load it again into a new file; "+
		"or, if an incomplete database will do and `PRAGMA integrity_check` says ok, remove %s",
		path, ErrUnfinishedBulkLoad, marker, strings.TrimSpace(string(b)), marker)
}

// bulkLoad is a bulk writer's load in progress: its marker file exists and
// the writer connection runs with synchronous=OFF. See the top of this file.
type bulkLoad struct {
	path   string // the database file
	marker string // path + bulkLoadSuffix
}

// beginBulkLoad writes and syncs the marker of a bulk load into the
// database at path, then turns off the syncs of the writer connection w.
func beginBulkLoad(ctx context.Context, path string, w *sql.DB) (*bulkLoad, error) {
	b := &bulkLoad{path: path, marker: path + bulkLoadSuffix}
	f, err := os.OpenFile(b.marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	_, err = fmt.Fprintf(f, "bulk load by pid %d, started %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = bulkSync(b.marker)
	}
	if err == nil {
		err = bulkSync(filepath.Dir(b.marker))
	}
	if err == nil {
		_, err = w.ExecContext(ctx, "PRAGMA synchronous=OFF")
	}
	if err != nil {
		os.Remove(b.marker) // nothing was written unsynced
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	return b, nil
}

// checkpoint makes everything committed durable, on w, the writer, with the
// store's other connections closed: synchronous back to NORMAL, then the
// whole WAL copied into the database file and the WAL emptied, with the
// syncs of a checkpoint under NORMAL.
func (b *bulkLoad) checkpoint(w *sql.DB) error {
	ctx := context.Background()
	if _, err := w.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	var busy, frames, copied int
	if err := w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied); err != nil {
		return fmt.Errorf("bulk load: final checkpoint: %w", err)
	}
	if busy != 0 || frames != copied {
		return fmt.Errorf("bulk load: final checkpoint incomplete (busy %d, %d of %d WAL pages copied)", busy, copied, frames)
	}
	return nil
}

// finish, once the writer is closed, fsyncs the database file and removes
// the marker: the load is complete and on disk.
func (b *bulkLoad) finish() error {
	err := bulkSync(b.path)
	if err == nil {
		err = os.Remove(b.marker)
	}
	if err == nil {
		err = bulkSync(filepath.Dir(b.path))
	}
	if err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	return nil
}

// bulkSync fsyncs a file or a directory (syncFile); a variable, so that the
// tests can see what a bulk load synced, and when.
var bulkSync = syncFile
