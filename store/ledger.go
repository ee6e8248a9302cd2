package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// Generation is the ledger row of one billed call.
type Generation struct {
	// ID is the id the caller saw in the response body (chatcmpl-…, msg_…,
	// resp_…); the generation and feedback endpoints accept it.
	ID          string
	AccountID   int64
	KeyID       string // public key id; empty if none
	Application string // attribution label
	Surface     string // chat | responses | messages | gencontent
	// Model is the caller's model id (intent), never a backend.
	Model        string
	RequestType  string
	Tier         string
	Streamed     bool
	FinishReason string

	PromptTokens        int // includes cached and cache-creation tokens
	CompletionTokens    int // includes reasoning tokens
	CachedPromptTokens  int
	CacheCreationTokens int
	ReasoningTokens     int

	// Cost is the caller's charge: at least zero, at most six decimals.
	Cost             apd.Decimal
	LatencyMS        int64
	GenerationTimeMS int64
	// CreatedAt is stamped from Options.Now by RecordGeneration when zero.
	CreatedAt time.Time
}

// genRow is a Generation converted to its stored form, done at enqueue
// time so that bad values are caught where the caller can be named.
type genRow struct {
	g          Generation
	costMicros int64
	createdMS  int64
}

// ledgerItem is one entry of the ledger queue: a generation, or, when done
// is set, a Sync marker that flushes the current batch and is closed once
// everything before it is committed.
type ledgerItem struct {
	row  genRow
	done chan struct{}
}

// RecordGeneration hands g to the ledger writer, which inserts the row,
// debits the account (balance -= cost, total_used += cost) and adds the cost
// to the day's spend_daily row of the account and key, all in the same
// transaction, batched with other generations. It returns before the commit:
// callers never wait for an fsync. It blocks only while the queue is full.
// The charge counts in Spend at once.
//
// A generation that cannot be stored (an empty or duplicate id, a negative
// cost or one with more than six decimals, an unknown account or key id),
// or one recorded after Close, is dropped and logged at Error level: it is
// a bug in the caller. Call Sync to wait for the commit.
func (s *Store) RecordGeneration(g Generation) {
	row, err := s.toRow(g)
	if err != nil {
		s.logDrop(g, err)
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.logDrop(g, ErrClosed)
		return
	}
	// Counted before it is queued, so that Spend never misses a charge
	// the ledger has not committed yet; a drop takes it back.
	s.spend.record(s, g.AccountID, g.KeyID, row.costMicros, row.g.CreatedAt)
	s.pending.Add(1)
	s.queue <- ledgerItem{row: row}
}

func (s *Store) toRow(g Generation) (genRow, error) {
	if g.ID == "" {
		return genRow{}, fmt.Errorf("%w: empty generation id", ErrInvalid)
	}
	cost, err := toMicros(g.Cost)
	if err != nil {
		return genRow{}, err
	}
	if cost < 0 {
		return genRow{}, fmt.Errorf("%w: negative cost", ErrInvalid)
	}
	if g.CreatedAt.IsZero() {
		g.CreatedAt = s.now()
	}
	return genRow{g: g, costMicros: cost, createdMS: ms(g.CreatedAt)}, nil
}

// logDrop logs a generation that will never reach the ledger, with what an
// operator needs to reconcile it by hand (never prompts or completions).
func (s *Store) logDrop(g Generation, err error) {
	s.log.Error("generation dropped from ledger",
		"generation_id", g.ID, "account_id", g.AccountID, "key_id", g.KeyID,
		"cost", g.Cost.String(), "input_tokens", g.PromptTokens,
		"output_tokens", g.CompletionTokens, "error", err)
}

// Sync waits until every generation recorded before the call is committed,
// so a following read sees it. It returns at once when nothing is pending.
func (s *Store) Sync(ctx context.Context) error {
	// pending is raised before a generation is queued and lowered after its
	// commit, so zero means everything recorded so far is committed.
	if s.pending.Load() == 0 {
		return nil
	}
	done := make(chan struct{})
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.queue <- ledgerItem{done: done}:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return fmt.Errorf("sync: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sync: %w", ctx.Err())
	}
}

// runLedger is the ledger writer goroutine, started by Open and waited for
// by Close. It exits when the queue is closed and drained. A batch is
// committed when it is full, when BatchInterval has passed since its first
// generation, or at once when a Sync marker arrives.
func (s *Store) runLedger() {
	defer close(s.done)
	// Commits run to completion even during shutdown: the queue is the only
	// record of these charges.
	ctx := context.Background()
	batch := make([]genRow, 0, min(s.batchSize, 1024)) // grows if BatchSize is larger
	var waiters []chan struct{}
	agg := &batchSums{debits: make(map[int64]int64), spend: make(map[spendDay]spendSum)}
	timer := time.NewTimer(s.batchInterval)
	timer.Stop()

	add := func(it ledgerItem) {
		if it.done != nil {
			waiters = append(waiters, it.done)
		} else {
			batch = append(batch, it.row)
		}
	}
	for {
		it, ok := <-s.queue
		if !ok {
			return
		}
		add(it)
		if it.done == nil {
			timer.Reset(s.batchInterval)
		collect:
			for len(batch) < s.batchSize {
				select {
				case it, ok := <-s.queue:
					if !ok {
						break collect // flush; the next receive returns
					}
					add(it)
					if it.done != nil {
						break collect
					}
				case <-timer.C:
					break collect
				}
			}
			timer.Stop()
		}
		s.flush(ctx, batch, agg)
		for _, w := range waiters {
			close(w)
		}
		clear(batch) // drop references for the GC
		clear(waiters)
		batch, waiters = batch[:0], waiters[:0]
	}
}

// flush commits batch in one transaction. If that fails, it retries each
// generation in a transaction of its own, so one bad row costs only itself.
func (s *Store) flush(ctx context.Context, batch []genRow, agg *batchSums) {
	if len(batch) == 0 {
		return
	}
	defer s.pending.Add(-int64(len(batch)))
	err := s.commitBatch(ctx, batch, agg)
	if err == nil {
		return
	}
	if len(batch) == 1 {
		s.drop(batch[0], err)
		return
	}
	if !isConstraint(err) {
		// Not a bad row but the database (I/O, a lock held past
		// busy_timeout): worth its own line before the per-row retries.
		s.log.Error("ledger batch failed, retrying row by row", "rows", len(batch), "error", err)
	}
	for i := range batch {
		if err := s.commitBatch(ctx, batch[i:i+1], agg); err != nil {
			s.drop(batch[i], err)
		}
	}
}

// insertChunk is the most rows one INSERT carries (19 parameters each, far
// under SQLite's limit of 32,766).
const insertChunk = 64

// insertSQL holds the INSERT statement text for each chunk size.
var insertSQL = buildInsertSQL()

func buildInsertSQL() (stmts [insertChunk + 1]string) {
	const head = `INSERT INTO generations (
	id, account_id, key_id, application, surface, model, request_type, tier,
	streamed, finish_reason, prompt_tokens, completion_tokens,
	cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
	cost_micros, latency_ms, generation_time_ms, created_at
) VALUES `
	const tuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	for n := 1; n <= insertChunk; n++ {
		stmts[n] = head + strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ")
	}
	return stmts
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

// batchSums is the scratch space of commitBatch, reused between batches:
// the debit of each account and the spend of each (account, key, day).
type batchSums struct {
	debits map[int64]int64
	spend  map[spendDay]spendSum
	args   []any // INSERT parameters, reused between batches
	rollup rollupSums
}

type spendDay struct {
	account int64
	key     string
	day     int32
}

type spendSum struct {
	requests int64
	cost     int64
}

// drop logs a generation the ledger could not commit and takes its charge
// back from the spend tracker.
func (s *Store) drop(r genRow, err error) {
	s.spend.unrecord(r.g.AccountID, r.g.KeyID, r.costMicros, r.g.CreatedAt)
	s.logDrop(r.g, err)
}

// commitBatch inserts the rows, applies one debit per account and one
// spend_daily upsert per (account, key, day), all in one transaction.
func (s *Store) commitBatch(ctx context.Context, rows []genRow, agg *batchSums) error {
	clear(agg.debits)
	clear(agg.spend)
	agg.rollup.sum(rows)
	// Prepare the statements this batch needs (once: they are cached)
	// before the transaction takes the writer's only connection. Parsing
	// them again for every batch was a quarter of the ledger's CPU.
	for _, q := range [...]string{insertSQL[min(len(rows), insertChunk)], insertSQL[len(rows)%insertChunk], debitSQL, spendSQL} {
		if q == "" {
			continue
		}
		if _, err := s.stmt(ctx, q); err != nil {
			return fmt.Errorf("ledger: prepare: %w", err)
		}
	}
	if err := s.prepareRollups(ctx, &agg.rollup); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: begin: %w", err)
	}
	defer tx.Rollback()
	// Rows go in multi-row INSERTs of up to insertChunk rows: one statement
	// step per chunk instead of per row, which is most of the ledger's CPU.
	args := agg.args[:0]
	for start := 0; start < len(rows); start += insertChunk {
		chunk := rows[start:min(start+insertChunk, len(rows))]
		args = args[:0]
		for i := range chunk {
			r := &chunk[i]
			g := &r.g
			var keyID sql.NullString
			if g.KeyID != "" {
				keyID = sql.NullString{String: g.KeyID, Valid: true}
			}
			args = append(args,
				g.ID, g.AccountID, keyID, g.Application, g.Surface, g.Model, g.RequestType, g.Tier,
				g.Streamed, g.FinishReason, g.PromptTokens, g.CompletionTokens,
				g.CachedPromptTokens, g.CacheCreationTokens, g.ReasoningTokens,
				r.costMicros, g.LatencyMS, g.GenerationTimeMS, r.createdMS)
			agg.debits[g.AccountID] += r.costMicros
			k := spendDay{account: g.AccountID, key: g.KeyID, day: dayNumber(g.CreatedAt)}
			sum := agg.spend[k]
			sum.requests++
			sum.cost += r.costMicros
			agg.spend[k] = sum
		}
		if _, err := tx.StmtContext(ctx, s.stmts[insertSQL[len(chunk)]]).ExecContext(ctx, args...); err != nil {
			if len(chunk) == 1 {
				return fmt.Errorf("ledger: insert generation %q: %w", chunk[0].g.ID, err)
			}
			return fmt.Errorf("ledger: insert %d generations: %w", len(chunk), err)
		}
	}
	clear(args) // drop references for the GC
	agg.args = args
	debit := tx.StmtContext(ctx, s.stmts[debitSQL])
	for acct, cost := range agg.debits {
		if cost == 0 {
			continue
		}
		if _, err := debit.ExecContext(ctx, cost, cost, acct); err != nil {
			return fmt.Errorf("ledger: debit account %d: %w", acct, err)
		}
	}
	spend := tx.StmtContext(ctx, s.stmts[spendSQL])
	for k, sum := range agg.spend {
		if _, err := spend.ExecContext(ctx, k.account, k.key, k.day, sum.requests, sum.cost); err != nil {
			return fmt.Errorf("ledger: spend of account %d: %w", k.account, err)
		}
	}
	// The usage roll-ups, in the same transaction as the rows they sum.
	if err := agg.rollup.write(ctx, func(ctx context.Context, q string, args []any) error {
		_, err := tx.StmtContext(ctx, s.stmts[q]).ExecContext(ctx, args...)
		return err
	}); err != nil {
		return fmt.Errorf("ledger: roll-ups: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: commit: %w", err)
	}
	return nil
}

const generationColumns = `id, account_id, COALESCE(key_id, ''), application, surface, model,
	request_type, tier, streamed, finish_reason, prompt_tokens, completion_tokens,
	cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
	cost_micros, latency_ms, generation_time_ms, created_at`

// Generation returns the account's generation with id. An unknown id, or
// one of another account, is ErrNotFound. It reads what is committed: call
// Sync first to see a generation recorded just before.
func (s *Store) Generation(ctx context.Context, accountID int64, id string) (Generation, error) {
	return s.scanGeneration(s.r.QueryRowContext(ctx,
		`SELECT `+generationColumns+` FROM generations WHERE id = ? AND account_id = ?`, id, accountID), id)
}

// GenerationByID returns the generation with id, whichever account it
// belongs to. It is for operators (the CLI); callers over HTTP always go
// through Generation, scoped to their account.
func (s *Store) GenerationByID(ctx context.Context, id string) (Generation, error) {
	return s.scanGeneration(s.r.QueryRowContext(ctx,
		`SELECT `+generationColumns+` FROM generations WHERE id = ?`, id), id)
}

func (s *Store) scanGeneration(row *sql.Row, id string) (Generation, error) {
	var (
		g             Generation
		cost, created int64
	)
	err := row.Scan(
		&g.ID, &g.AccountID, &g.KeyID, &g.Application, &g.Surface, &g.Model,
		&g.RequestType, &g.Tier, &g.Streamed, &g.FinishReason, &g.PromptTokens, &g.CompletionTokens,
		&g.CachedPromptTokens, &g.CacheCreationTokens, &g.ReasoningTokens,
		&cost, &g.LatencyMS, &g.GenerationTimeMS, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Generation{}, fmt.Errorf("generation %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Generation{}, fmt.Errorf("generation: %w", err)
	}
	g.Cost = fromMicros(cost)
	g.CreatedAt = fromMS(created)
	return g, nil
}
