package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/svcgw/svcgw/store"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The ledger on SQLite: each batch is one transaction on the writer
// connection, its rows in multi-row INSERTs of prepared statements, then
// one debit per account, one spend_daily upsert per (account, key, day)
// and the roll-ups (rollup.go), yielding the processor between statements
// (yield.go). A bulk writer's batches take the driver connection
// (bulkwriter.go).

// StoredRow reads the account, cost and creation time of the stored
// generation id (see policy.stored).
func (s *Store) StoredRow(ctx context.Context, id string) (acct, cost, created int64, err error) {
	err = s.w.QueryRowContext(ctx, `SELECT account_id, cost_micros, created_at FROM generations WHERE id = ?`, id).
		Scan(&acct, &cost, &created)
	return acct, cost, created, err
}

// insertChunk is the most rows one INSERT carries (19 parameters each, far
// under SQLite's limit of 32,766).
const insertChunk = 64

// insertSQL holds the INSERT statement text for each chunk size, which are
// the roll-ups' (upsertChunks: 64 and the powers of two below it, chunkFor).
// Seven statements cover every batch: a prepared statement of n rows holds
// a program of ~3.5 KB a row in SQLite's memory, so one per count from 1 to
// 64 held 7 MB on the writer connection, against ~0.4 MB for these seven.
var insertSQL = buildInsertSQL()

const insertHead = `INSERT` + insertInto

const insertInto = ` INTO generations (
	id, account_id, key_id, application, surface, model, request_type, tier,
	streamed, finish_reason, prompt_tokens, completion_tokens,
	cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
	cost_micros, latency_ms, generation_time_ms, created_at
) VALUES `

const insertTuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// insertColumns is the number of columns insertHead names.
const insertColumns = 19

func buildInsertSQL() (stmts [insertChunk + 1]string) {
	for _, n := range upsertChunks {
		stmts[n] = insertSQLOf(n)
	}
	return stmts
}

func insertSQLOf(n int) string {
	return insertHead + insertTuples(n)
}

func insertTuples(n int) string {
	return strings.TrimSuffix(strings.Repeat(insertTuple+", ", n), ", ")
}

// bulkInsertSQL is the INSERT of bulkInsertChunk rows, a bulk writer's.
// OR ROLLBACK: see bulkwriter.go, "statement journal".
var bulkInsertSQL = `INSERT OR ROLLBACK` + insertInto + insertTuples(bulkInsertChunk)

// insertSQLFor is the INSERT statement of size rows (a chunk size).
func insertSQLFor(size int) string {
	if size == bulkInsertChunk {
		return bulkInsertSQL
	}
	return insertSQL[size]
}

// insertChunkFor is the size of the next INSERT when n rows are left.
func (s *Store) insertChunkFor(n int) int {
	if n >= bulkInsertChunk && store.BulkWriter(s.BatchSize()) {
		return bulkInsertChunk
	}
	return chunkFor(n)
}

// stmt returns the prepared statement of query, preparing it on the
// writer connection the first time (which must not be inside a
// transaction: the writer has one connection). Only the ledger goroutine
// calls it, so the cache needs no lock; Close closes the statements.
func (s *Store) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := s.stmts[query]; st != nil {
		return st, nil
	}
	st, err := s.w.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = make(map[string]*sql.Stmt)
	}
	s.stmts[query] = st
	return st, nil
}

// The ledger's other statements: one debit per account and one spend_daily
// upsert per (account, key, day) of a batch.
const (
	debitSQL = `UPDATE accounts SET balance_micros = balance_micros - ?, total_used_micros = total_used_micros + ? WHERE id = ?`
	spendSQL = `INSERT INTO spend_daily (account_id, key_id, day, requests, cost_micros) VALUES (?, ?, ?, ?, ?)
	 ON CONFLICT (account_id, key_id, day) DO UPDATE SET
	   requests = requests + excluded.requests, cost_micros = cost_micros + excluded.cost_micros`
)

// concurrentSumRows is the fewest rows of a batch whose sums are made
// concurrently with its INSERTs (see CommitBatch): below it, starting a
// goroutine and preparing every roll-up upsert cost more than they save.
// Only batches of a bulk writer reach it (store/bulkwriter.go). A variable
// for TestBulkWriter, which lowers it.
var concurrentSumRows = 4096

// CommitBatch inserts the rows, applies one debit per account and one
// spend_daily upsert per (account, key, day), all in one transaction.
func (s *Store) CommitBatch(ctx context.Context, rows []store.GenRow, agg *store.BatchSums) error {
	// Prepare the statements this batch needs (once: they are cached)
	// before the transaction takes the writer's only connection. Parsing
	// them again for every batch was a quarter of the ledger's CPU.
	for n := len(rows); n > 0; {
		size := s.insertChunkFor(n)
		if size != bulkInsertChunk { // prepared on the driver connection (bulkInsert)
			if _, err := s.stmt(ctx, insertSQLFor(size)); err != nil {
				return fmt.Errorf("ledger: prepare: %w", err)
			}
		}
		n -= min(n, size)
		if size >= insertChunk {
			n %= size // the rest of full chunks all use this one
		}
	}
	queries := []string{debitSQL, spendSQL}
	if s.insertChunkFor(len(rows)) == bulkInsertChunk {
		queries = append(queries, accountsFoundSQL, keysFoundSQL) // checkParents
	}
	for _, q := range queries {
		if _, err := s.stmt(ctx, q); err != nil {
			return fmt.Errorf("ledger: prepare: %w", err)
		}
	}
	// The batch's sums (debits, spend, roll-ups) are made on another core,
	// when there is one, while SQLite inserts the rows: a large batch's
	// sums take ~5% of its commit (a bulk load). The roll-up upserts are
	// then all prepared first (they cannot be prepared inside the
	// transaction), since the sums that tell which are needed come later.
	summed := func() {}
	if len(rows) >= concurrentSumRows && runtime.GOMAXPROCS(0) > 1 {
		if err := s.prepareRollups(ctx, nil); err != nil {
			return err
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			agg.Sum(rows)
		}()
		summed = func() { <-done }
		// The caller reuses agg and rows once this returns.
		defer func() { summed() }()
	} else {
		agg.Sum(rows)
		if err := s.prepareRollups(ctx, &agg.Rollup); err != nil {
			return err
		}
	}
	// A bulk writer's batch runs on a connection of its own (the writer's
	// one), so that its 1,024-row INSERTs can go to the driver directly,
	// and with foreign keys off (bulkwriter.go, "statement journal").
	var (
		tx   *sql.Tx
		bulk *bulkInsert
		err  error
	)
	if s.insertChunkFor(len(rows)) == bulkInsertChunk {
		bulk = &s.bulkIns
		if err := bulk.begin(ctx, s.w); err != nil {
			return fmt.Errorf("ledger: begin: %w", err)
		}
		defer bulk.end()
		tx, err = bulk.conn.BeginTx(ctx, nil)
	} else {
		tx, err = s.w.BeginTx(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("ledger: begin: %w", err)
	}
	defer tx.Rollback()
	// Rows go in multi-row INSERTs of up to insertChunk rows: one statement
	// step per chunk instead of per row, which is most of the ledger's CPU.
	args := s.args[:0]
	for start := 0; start < len(rows); {
		chunk := rows[start : start+s.insertChunkFor(len(rows)-start)]
		start += len(chunk)
		s.yieldCommit(len(rows))
		var err error
		if len(chunk) == bulkInsertChunk {
			err = bulk.exec(ctx, chunk)
			s.bulkInserts++
		} else {
			args = args[:0]
			for i := range chunk {
				args = appendValues(args, &chunk[i])
			}
			_, err = tx.StmtContext(ctx, s.stmts[insertSQLFor(len(chunk))]).ExecContext(ctx, args...)
		}
		if err != nil {
			if len(chunk) == 1 {
				return fmt.Errorf("ledger: insert generation %q: %w", chunk[0].Gen.ID, err)
			}
			return fmt.Errorf("ledger: insert %d generations: %w", len(chunk), err)
		}
	}
	clear(args) // drop references for the GC
	s.args = args
	if err := s.insertItems(ctx, tx, rows); err != nil {
		return err
	}
	summed()
	if bulk != nil {
		// Its INSERTs ran without SQLite's foreign-key checks.
		if err := s.checkParents(ctx, tx, agg); err != nil {
			return err
		}
		if bulkBatchHook != nil {
			bulkBatchHook(ctx, tx)
		}
	}
	debit := tx.StmtContext(ctx, s.stmts[debitSQL])
	for acct, cost := range agg.Debits {
		if cost == 0 {
			continue
		}
		s.yieldCommit(len(rows))
		if _, err := debit.ExecContext(ctx, cost, cost, acct); err != nil {
			return fmt.Errorf("ledger: debit account %d: %w", acct, err)
		}
	}
	spend := tx.StmtContext(ctx, s.stmts[spendSQL])
	for k, sum := range agg.Spend {
		s.yieldCommit(len(rows))
		if _, err := spend.ExecContext(ctx, k.Account, k.Key, int64(k.Day), sum.Requests, sum.Cost); err != nil {
			return fmt.Errorf("ledger: spend of account %d: %w", k.Account, err)
		}
	}
	// The usage roll-ups, in the same transaction as the rows they sum.
	if err := s.rollups.write(ctx, &agg.Rollup, func(ctx context.Context, q string, args []any) error {
		s.yieldCommit(len(rows))
		_, err := tx.StmtContext(ctx, s.stmts[q]).ExecContext(ctx, args...)
		return err
	}); err != nil {
		return fmt.Errorf("ledger: roll-ups: %w", err)
	}
	if err := s.CommitHook(); err != nil {
		return fmt.Errorf("ledger: commit: %w", err) // rolled back by the deferred Rollback
	}
	s.yieldCommit(len(rows))
	s.feed.committing()
	if err := tx.Commit(); err != nil {
		s.feed.committed(nil) // it may have taken effect
		return fmt.Errorf("ledger: commit: %w: %w", store.ErrUncertain, err)
	}
	s.feed.committed(&agg.Rollup)
	return nil
}

// appendValues appends the INSERT parameters of r to dst, in insertHead's
// order, as the driver takes them (string, int64, bool, nil): any other
// type database/sql converts by reflection, for every argument of every
// row.
func appendValues(dst []any, r *store.GenRow) []any {
	g := &r.Gen
	var keyID any // NULL
	if g.KeyID != "" {
		keyID = g.KeyID
	}
	return append(dst,
		g.ID, g.AccountID, keyID, g.Application, g.Surface, g.Model, g.RequestType, g.Tier,
		g.Streamed, g.FinishReason, int64(g.PromptTokens), int64(g.CompletionTokens),
		int64(g.CachedPromptTokens), int64(g.CacheCreationTokens), int64(g.ReasoningTokens),
		r.CostMicros, g.LatencyMS, g.GenerationTimeMS, r.CreatedMS)
}

// Unstorable reports whether err is the database rejecting a row as such
// (a constraint, a value it cannot hold; a parent a bulk batch's
// checkParents did not find): committing it again can never succeed. Any
// other failure is the database's, and worth retrying.
func (s *Store) Unstorable(err error) bool {
	if errors.Is(err, errMissingParent) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
		return true
	}
	return false
}

// FaultReason says in a few words why a ledger commit failed, for operators.
func (s *Store) FaultReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "a commit did not finish in time: is another process holding the database's write lock?"
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "a commit failed"
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return "the disk is full"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "the database is locked by another connection"
	case sqlite3.SQLITE_IOERR:
		return "disk I/O error"
	case sqlite3.SQLITE_READONLY:
		return "the database is read-only"
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return "the database file is damaged"
	case sqlite3.SQLITE_CANTOPEN:
		return "the database file cannot be opened"
	}
	return "the database refused the write"
}

// prepareRollups prepares, on the writer connection for the ledger's
// statement cache, the upserts that writing rs will use, or with rs nil
// every size of both (each is prepared once: a 64-row upsert takes a while
// to parse). Like every s.stmt call, it must run outside a transaction.
func (s *Store) prepareRollups(ctx context.Context, rs *store.RollupSums) error {
	daily, periods := 2*upsertChunks[0]-1, 2*upsertChunks[0]-1 // every size
	if rs != nil {
		daily, periods = len(rs.Daily), len(rs.Periods)
	}
	for _, t := range [...]struct {
		rows   int
		bySize map[int]string
	}{{daily, dailyUpsertSQL}, {periods, periodUpsertSQL}} {
		for n := t.rows; n > 0; {
			size := chunkFor(n)
			if _, err := s.stmt(ctx, t.bySize[size]); err != nil {
				return fmt.Errorf("ledger: prepare roll-ups: %w", err)
			}
			n -= min(n, size)
			if size == upsertChunks[0] {
				n %= size // the rest of full chunks all use this one
			}
		}
	}
	return nil
}
