package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcgw/svcgw/money"
	"golang.org/x/sync/singleflight"
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

	// Cost is the caller's charge: at least zero.
	Cost             money.Micros
	LatencyMS        int64
	GenerationTimeMS int64
	// CreatedAt is stamped from Options.Now by RecordGeneration when zero.
	CreatedAt time.Time
	// Items are the call's output items to keep (items.go), inserted with
	// the record; never read back with it.
	Items []Item
}

// GenRow is a Generation converted to its stored form, done at enqueue
// time so that bad values are caught where the caller can be named.
type GenRow struct {
	Gen        Generation
	CostMicros int64
	CreatedMS  int64
	// uncertain is set once a commit that held the row failed at its
	// COMMIT: such a commit may have taken effect all the same (see flush).
	uncertain bool
	// Lease and KeyLease are the balance leases of the account and the
	// key the charge was made against (PostgreSQL); 0 for none.
	Lease, KeyLease int64
}

// RecordGeneration hands g to the ledger writer, which inserts the row,
// debits the account (balance -= cost, total_used += cost) and adds the cost
// to the day's spend_daily row of the account and key, all in the same
// transaction, batched with other generations. It returns before the commit
// and never blocks: callers never wait for an fsync, nor for a database that
// fails. The charge counts in Spend at once, and until the ledger has
// committed it or dropped it.
//
// A generation the database fails to take (the disk full, the file locked
// by another process, an I/O error) is kept in memory and retried until it
// is committed; meanwhile CheckLedger refuses billable calls, which is what
// bounds the memory it takes (see CheckLedger). Only a generation that can
// never be stored is dropped, and logged at Error level with what an
// operator needs to reconcile it: one rejected before it is queued (an
// empty id, a negative cost or one with more than six decimals), one the
// database rejects as such (a duplicate id, an unknown account or key id),
// and one recorded after Close. Those are bugs in the caller. Call Sync to
// wait for the commit.
func (s *Policy) RecordGeneration(g Generation) {
	row, err := s.toRow(g)
	if err != nil {
		s.logDrop(g, err)
		return
	}
	// Counted before it is queued, so that Spend never misses a charge
	// the ledger has not committed yet; a drop takes it back.
	row = s.charges.Record(row)
	q := &s.queue
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		s.charges.Unrecord(row)
		s.logDrop(g, ErrClosed)
		return
	}
	q.push(row)
	n := q.n
	s.pending.Add(1)
	q.mu.Unlock()
	// The writer needs waking for a first row (it may be idle) and for a
	// full batch (it may be waiting for one); the rows in between join the
	// batch it is already collecting.
	if n == 1 || n == s.batchSize {
		q.signal()
	}
}

func (s *Policy) toRow(g Generation) (GenRow, error) {
	if g.ID == "" {
		return GenRow{}, fmt.Errorf("%w: empty generation id", ErrInvalid)
	}
	if g.Cost < 0 {
		return GenRow{}, fmt.Errorf("%w: negative cost", ErrInvalid)
	}
	if g.CreatedAt.IsZero() {
		g.CreatedAt = s.now()
	}
	return GenRow{Gen: g, CostMicros: int64(g.Cost), CreatedMS: Millis(g.CreatedAt)}, nil
}

// logDrop logs a generation that will never reach the ledger, with what an
// operator needs to reconcile it by hand (never prompts or completions).
func (s *Policy) logDrop(g Generation, err error) {
	s.dropped.Add(1)
	s.log.Error("generation dropped from ledger", append(generationAttrs(g), "error", err)...)
}

// generationAttrs are the log attributes of g: every column of its row, so
// that an operator can insert it by hand.
func generationAttrs(g Generation) []any {
	return []any{
		"generation_id", g.ID, "account_id", g.AccountID, "key_id", g.KeyID,
		"cost", g.Cost.String(), "created_at", g.CreatedAt.UTC().Format(time.RFC3339Nano),
		"input_tokens", g.PromptTokens, "output_tokens", g.CompletionTokens,
		"cached_input_tokens", g.CachedPromptTokens, "cache_creation_tokens", g.CacheCreationTokens,
		"reasoning_tokens", g.ReasoningTokens, "surface", g.Surface, "model", g.Model,
		"request_type", g.RequestType, "tier", g.Tier, "streamed", g.Streamed,
		"finish_reason", g.FinishReason, "application", g.Application,
		"latency_ms", g.LatencyMS, "generation_time_ms", g.GenerationTimeMS,
	}
}

// Sync waits until every generation recorded before the call is committed,
// so a following read sees it. It returns at once when nothing is pending.
// While the ledger is failing or stalled (see CheckLedger) it does not wait
// for the recovery: it returns an error wrapping ErrUnavailable.
func (s *Policy) Sync(ctx context.Context) error { return s.syncAfter(ctx, 0) }

// SyncWithin is Sync that leaves the writer up to d to commit on its own
// (it does at least every batch interval while generations come) before it
// asks for a commit at once, as Sync does: readers that can wait that long
// for what was recorded before them then cost the writer no commit of its
// own (see the account endpoints' shared syncs).
func (s *Policy) SyncWithin(ctx context.Context, d time.Duration) error {
	return s.syncAfter(ctx, d)
}

// syncAfter is Sync, asking the writer for an early commit only after
// patience (at once when it is not positive).
func (s *Policy) syncAfter(ctx context.Context, patience time.Duration) error {
	// pending is raised before a generation is queued and lowered after it
	// is settled, so zero means everything recorded so far is committed.
	if s.pending.Load() == 0 {
		return nil
	}
	q := &s.queue
	q.mu.Lock()
	if q.settled == q.recorded {
		q.mu.Unlock()
		return nil
	}
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if err := s.ledgerFault(); err != nil {
		q.mu.Unlock()
		return fmt.Errorf("sync: %w", err)
	}
	done := make(chan error, 1)
	q.waiters = append(q.waiters, syncWaiter{target: q.recorded, done: done, patient: patience > 0})
	q.mu.Unlock()
	var hurry <-chan time.Time
	if patience > 0 {
		t := time.NewTimer(patience)
		defer t.Stop()
		hurry = t.C
	} else {
		q.signal()
	}
	// The writer answers when the commit succeeds or fails; the ticker
	// covers a commit stuck where its deadline cannot reach it.
	tick := time.NewTicker(s.commitTimeout)
	defer tick.Stop()
	for {
		select {
		case <-hurry:
			hurry = nil
			q.hurry(done)
		case err := <-done:
			if err != nil {
				return fmt.Errorf("sync: %w", err)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sync: %w", ctx.Err())
		case <-tick.C:
			if err := s.ledgerFault(); err != nil {
				return fmt.Errorf("sync: %w", err)
			}
		}
	}
}

// Policy is what svcgw decides, written once for every engine, which each
// engine's type (sqlite.Store, postgres.Store) embeds: the batched ledger
// writer (the queue of generations recorded and not yet settled, the writer goroutine
// that commits them in batches and retries what the database fails to
// take, the health CheckLedger reports), authentication and its cache,
// accounts, credits, caps, keys, feedback, sealing keys, usage reports and
// retention's deletes. What differs between databases is behind db (the
// engine: how a batch is committed, how a failure is classified, its
// connections) and charges (how a charge counts before it is committed:
// in memory on SQLite, against balance leases on PostgreSQL).
type Policy struct {
	db      Engine
	charges ChargeCounter

	now  func() time.Time
	rand io.Reader
	log  *slog.Logger

	batchSize     int
	batchInterval time.Duration
	queueLimit    int64
	commitTimeout time.Duration
	retryInterval time.Duration
	closeTimeout  time.Duration
	queryTimeout  time.Duration
	commitHook    func() error
	onCommit      func(LedgerCommit)
	afterCommit   func() // after each successful commit: the WAL's checkpoint (SQLite)

	queue   ledgerQueue
	pending atomic.Int64  // generations queued and not yet settled
	done    chan struct{} // closed when the ledger writer has exited
	health  ledgerHealth
	epoch   time.Time // the writer's start: s.mono counts from it
	lost    int       // generations Close gave up on; set by the writer before done
	// committed and dropped count generations for LedgerStats.
	committed, dropped atomic.Uint64

	// rollupsComplete is set once the usage roll-ups cover every
	// generation (at once on an engine whose databases were born with
	// them): no backfill is pending (see Usage, Backfiller).
	rollupsComplete atomic.Bool

	auth authCache // recent authentications
	// authReads shares one read among the calls that authenticate the
	// same key at once, and runs one read ahead per key at a time (see
	// Authenticate).
	authReads singleflight.Group
}

// ChargeCounter counts each charge from the moment it is recorded until it
// is committed (and after), and takes back one the ledger drops.
//
// Rows go in and out by value: through a pointer, the interface call made
// every recorded row escape to the heap (288 bytes a call).
type ChargeCounter interface {
	// Record counts r's charge and returns r with what it was counted
	// against (the leases, on PostgreSQL).
	Record(r GenRow) GenRow
	Unrecord(r GenRow)
}

// Init applies opts's ledger settings and their defaults.
func (s *Policy) Init(opts Options, db Engine, charges ChargeCounter) {
	s.db, s.charges = db, charges
	s.now, s.rand, s.log = opts.Now, opts.Rand, opts.Logger
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.batchSize = opts.BatchSize
	if s.batchSize <= 0 {
		s.batchSize = 256
	}
	s.queue.keep = freeBlocks(s.batchSize)
	s.batchInterval = OrDefault(opts.BatchInterval, 20*time.Millisecond)
	s.auth.ttl = opts.AuthCacheTTL
	if s.auth.ttl == 0 {
		s.auth.ttl = DefaultAuthCacheTTL
	}
	s.queueLimit = int64(opts.QueueSize)
	if s.queueLimit <= 0 {
		s.queueLimit = 4096
	}
	s.commitTimeout = OrDefault(opts.CommitTimeout, 5*time.Second)
	s.retryInterval = OrDefault(opts.RetryInterval, time.Second)
	s.closeTimeout = OrDefault(opts.CloseTimeout, 10*time.Second)
	s.queryTimeout = OrDefault(opts.QueryTimeout, 5*time.Second)
	s.commitHook = opts.CommitHook
	s.onCommit = opts.OnCommit
}

// start starts the writer goroutine.
func (s *Policy) StartLedger() {
	s.queue.wake = make(chan struct{}, 1)
	s.done = make(chan struct{})
	s.epoch = time.Now()
	go s.runLedger()
}

// stop stops accepting generations and waits for the writer to commit
// what is queued (or to give up on it, CloseTimeout later); it reports the
// generations it gave up on.
func (s *Policy) StopLedger() error {
	s.queue.mu.Lock()
	s.queue.closed = true
	s.queue.mu.Unlock()
	s.queue.signal()
	<-s.done
	if s.lost > 0 {
		return fmt.Errorf("close: %w: %d generations could not be recorded (each is logged)", ErrUnavailable, s.lost)
	}
	return nil
}

// ledgerQueue holds the generations recorded and not yet settled (committed,
// or dropped as unstorable), oldest first. The writer commits from its head
// and removes rows only once they are settled, so a row the database fails
// to take stays at the head and is retried. It is in memory and has no
// limit of its own: CheckLedger bounds it by refusing billable calls.
//
// Rows live in fixed blocks, a few of which are kept for reuse: the queue
// neither copies rows as it grows nor keeps a backlog's memory after it.
type ledgerQueue struct {
	mu       sync.Mutex
	blocks   []*rowBlock // the queued rows start at blocks[0][head]
	head     int
	n        int         // rows queued
	free     []*rowBlock // emptied blocks kept for reuse, at most keep
	keep     int         // see freeBlocks
	recorded uint64      // generations ever queued
	settled  uint64      // generations ever settled: recorded - settled = n
	waiters  []syncWaiter
	closed   bool
	// wake tells the writer to look at the queue again (capacity 1, so a
	// signal is never lost and never blocks).
	wake chan struct{}
}

// rowBlock is one block of queued rows, 70 KiB.
type rowBlock [256]GenRow

// maxFreeBlocks is how many empty blocks the queue keeps for reuse.
const maxFreeBlocks = 4

// freeBlocks is how many empty blocks the queue of a ledger with batches of
// up to batchSize rows keeps for reuse: maxFreeBlocks, or a batch's worth
// for a bulk writer, whose queue holds one or two batches all the time
// (bench/seed keeps it so): dropping the blocks of each batch committed
// and allocating those of the next made a seeding allocate (and zero, and
// the GC scan) 280 bytes a call, a fifth of what it allocated.
func freeBlocks(batchSize int) int {
	if BulkWriter(batchSize) {
		return batchSize / len(rowBlock{})
	}
	return maxFreeBlocks
}

// at is the i-th queued row.
func (q *ledgerQueue) at(i int) *GenRow {
	i += q.head
	return &q.blocks[i/len(rowBlock{})][i%len(rowBlock{})]
}

// push appends r. Callers hold q.mu.
func (q *ledgerQueue) push(r GenRow) {
	if (q.head+q.n)/len(rowBlock{}) == len(q.blocks) {
		var b *rowBlock
		if k := len(q.free); k > 0 {
			b, q.free = q.free[k-1], q.free[:k-1]
		} else {
			b = new(rowBlock)
		}
		q.blocks = append(q.blocks, b)
	}
	q.n++
	*q.at(q.n - 1) = r
	q.recorded++
}

// syncWaiter is a Sync waiting for settled to reach target.
type syncWaiter struct {
	target uint64
	done   chan error // capacity 1; nil when committed
	// patient waits for the writer's own commit: it does not make the
	// writer commit early (state's syncing) until hurry.
	patient bool
}

// hurry makes the waiter answered on done ask for a commit at once, if it
// is still waiting.
func (q *ledgerQueue) hurry(done chan error) {
	q.mu.Lock()
	for i := range q.waiters {
		if q.waiters[i].done == done {
			q.waiters[i].patient = false
		}
	}
	q.mu.Unlock()
	q.signal()
}

func (q *ledgerQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// state is what the writer decides on: the queued rows, whether a Sync is
// waiting for an early commit, and whether Close was called.
func (q *ledgerQueue) state() (n int, syncing, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, w := range q.waiters {
		if !w.patient {
			syncing = true
			break
		}
	}
	return q.n, syncing, q.closed
}

// peek copies up to max rows from the head into dst.
func (q *ledgerQueue) peek(dst []GenRow, max int) []GenRow {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(q.n, max)
	// Grown once to the size needed: appending grew a bulk writer's first
	// batch of 131,072 rows (37 MB) twenty times, copying each time.
	dst = slices.Grow(dst, n)
	for i := range n {
		dst = append(dst, *q.at(i))
	}
	return dst
}

// failed records that a commit of the first k queued rows failed with err.
func (q *ledgerQueue) failed(k int, err error) {
	if !errors.Is(err, ErrUncertain) {
		return // rolled back: nothing to remember
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range min(k, q.n) {
		q.at(i).uncertain = true
	}
}

// settle removes the first k queued rows, which the writer has committed or
// dropped, and wakes the Syncs that were waiting for them.
func (s *Policy) settle(k int) {
	q := &s.queue
	q.mu.Lock()
	for i := range k {
		*q.at(i) = GenRow{} // drop references for the GC
	}
	q.head += k
	q.n -= k
	q.settled += uint64(k)
	for q.head >= len(rowBlock{}) {
		if len(q.free) < q.keep {
			q.free = append(q.free, q.blocks[0])
		}
		q.blocks[0] = nil
		q.blocks = q.blocks[1:]
		q.head -= len(rowBlock{})
	}
	if q.n == 0 {
		q.head = 0 // reuse the block from its start
	}
	s.pending.Add(-int64(k)) // before a Sync returns: it reads pending next
	i := 0
	for ; i < len(q.waiters) && q.waiters[i].target <= q.settled; i++ {
		q.waiters[i].done <- nil
	}
	q.waiters = append(q.waiters[:0], q.waiters[i:]...)
	q.mu.Unlock()
}

// failWaiters answers every waiting Sync with err.
func (q *ledgerQueue) failWaiters(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, w := range q.waiters {
		w.done <- err
	}
	clear(q.waiters)
	q.waiters = q.waiters[:0]
}

// runLedger is the ledger writer goroutine, started by Open and waited for
// by Close. A batch is committed when it is full, when BatchInterval has
// passed since the writer began collecting it, or at once when a Sync is
// waiting. When a commit fails for a reason other than a bad row, the
// ledger is failing (CheckLedger refuses billable calls) and the writer
// retries the same rows, waiting a little longer each time up to
// RetryInterval, until a commit succeeds. After Close it commits what is
// queued and exits; rows it still cannot commit CloseTimeout later are
// logged, one line each, and counted in Close's error.
func (s *Policy) runLedger() {
	defer close(s.done)
	q := &s.queue
	batch := make([]GenRow, 0, min(s.batchSize, 1024)) // grows if BatchSize is larger
	agg := &BatchSums{Debits: make(map[int64]int64), Spend: make(map[SpendDay]SpendSum)}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		backoff  time.Duration // before the next attempt; zero while commits succeed
		deadline time.Time     // set by Close: when to give up
	)
	for {
		n, syncing, closed := q.state()
		if closed && deadline.IsZero() {
			deadline = time.Now().Add(s.closeTimeout)
		}
		switch {
		case n == 0 && closed:
			return
		case n == 0:
			<-q.wake
			continue
		case backoff > 0 && closed && !time.Now().Add(backoff).Before(deadline):
			s.abandon()
			return
		case backoff > 0:
			timer.Reset(backoff)
			<-timer.C
		case !closed && !syncing && n < s.batchSize:
			s.collect(timer)
		}
		batch = q.peek(batch[:0], s.batchSize)
		by := time.Now().Add(s.commitTimeout)
		if closed && deadline.Before(by) {
			by = deadline
		}
		attempt := time.Now()
		err := s.flush(by, batch, agg)
		clear(batch) // drop references for the GC
		if err != nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), s.retryInterval)
			s.ledgerFailed(err, attempt)
			continue
		}
		backoff = 0
		s.ledgerCommitted()
		if s.afterCommit != nil {
			s.afterCommit()
		}
	}
}

// collect waits until the queue holds a full batch, a Sync waits or Close
// was called, or BatchInterval passes.
func (s *Policy) collect(timer *time.Timer) {
	timer.Reset(s.batchInterval)
	defer timer.Stop()
	for {
		select {
		case <-s.queue.wake:
			if n, syncing, closed := s.queue.state(); n >= s.batchSize || syncing || closed {
				return
			}
		case <-timer.C:
			return
		}
	}
}

// flush commits batch, a copy of the oldest queued rows, and settles what
// it committed or dropped. A batch the database rejects because of a bad
// row is committed row by row, so that only the bad row is dropped. Any
// other failure (the disk full, the file locked past the deadline, an I/O
// error) is returned: the rows not yet settled stay queued, still counted
// in Spend, and are retried.
func (s *Policy) flush(by time.Time, batch []GenRow, agg *BatchSums) error {
	err := s.commit(by, batch, agg)
	if err == nil {
		s.settle(len(batch))
		return nil
	}
	if !s.db.Unstorable(err) {
		s.queue.failed(len(batch), err)
		return err
	}
	var committed map[string]bool // ids committed by this loop
	for i := range batch {
		r := &batch[i]
		if len(batch) > 1 {
			err = s.commit(by, batch[i:i+1], agg)
		}
		switch {
		case err == nil:
			if committed == nil {
				committed = make(map[string]bool)
			}
			committed[r.Gen.ID] = true
		case !s.db.Unstorable(err):
			s.queue.failed(len(batch)-i, err)
			return err
		case r.uncertain && !committed[r.Gen.ID] && s.stored(by, r):
			// A COMMIT that reported failure took effect after all:
			// the row, its debit and its spend are in.
			s.log.Warn("ledger: a commit reported as failed had succeeded; not charging it twice",
				"generation_id", r.Gen.ID)
		default:
			s.drop(*r, err)
		}
		s.settle(1)
	}
	return nil
}

// commit runs CommitBatch with a deadline, marking the time it began for
// CheckLedger, which treats a commit running past CommitTimeout as failing
// even when its deadline cannot interrupt it.
func (s *Policy) commit(by time.Time, rows []GenRow, agg *BatchSums) error {
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	s.health.commitStart.Store(s.mono())
	defer s.health.commitStart.Store(0)
	start := time.Now()
	err := s.db.CommitBatch(ctx, rows, agg)
	s.observeCommit(len(rows), start, err)
	return err
}

// stored reports whether r's row is in the database as r would have
// written it. Only a row whose earlier COMMIT reported failure is asked
// about: that commit may have taken effect, and retrying it then meets its
// own row.
func (s *Policy) stored(by time.Time, r *GenRow) bool {
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	acct, cost, created, err := s.db.StoredRow(ctx, r.Gen.ID)
	return err == nil && acct == r.Gen.AccountID && cost == r.CostMicros && created == r.CreatedMS
}

// abandon logs every row still queued when Close gives up on a ledger that
// cannot commit, one Error line each with every column, so an operator can
// enter them by hand, and answers the waiting Syncs.
func (s *Policy) abandon() {
	q := &s.queue
	q.mu.Lock()
	s.lost = q.n
	for i := range q.n {
		r := q.at(i)
		s.log.Error("generation not recorded: the ledger could not commit it before shutdown",
			append(generationAttrs(r.Gen), "cost_micros", r.CostMicros)...)
	}
	q.mu.Unlock()
	err := fmt.Errorf("%w: %d generations could not be recorded before shutdown", ErrUnavailable, s.lost)
	s.log.Error("ledger closed with generations not recorded; each is logged above", "count", s.lost, "error", s.ledgerErr())
	q.failWaiters(err)
}

// BatchSums is the scratch space of CommitBatch, reused between batches:
// the debit of each account and the spend of each (account, key, day).
type BatchSums struct {
	Debits map[int64]int64
	Spend  map[SpendDay]SpendSum
	Rollup RollupSums
}

// Sum empties the sums and adds up rows in them: the debit of each account,
// the spend of each (account, key, day) and the roll-ups.
func (agg *BatchSums) Sum(rows []GenRow) {
	clear(agg.Debits)
	clear(agg.Spend)
	for i := range rows {
		r := &rows[i]
		g := &r.Gen
		agg.Debits[g.AccountID] += r.CostMicros
		k := SpendDay{Account: g.AccountID, Key: g.KeyID, Day: DayNumber(g.CreatedAt)}
		sum := agg.Spend[k]
		sum.Requests++
		sum.Cost += r.CostMicros
		agg.Spend[k] = sum
	}
	agg.Rollup.sum(rows)
}

type SpendDay struct {
	Account int64
	Key     string
	Day     int32
}

type SpendSum struct {
	Requests int64
	Cost     int64
}

// drop logs a generation that can never be stored and takes its charge
// back from the spend tracker.
func (s *Policy) drop(r GenRow, err error) {
	s.charges.Unrecord(r)
	s.logDrop(r.Gen, err)
}

// ErrUncertain marks a failure of the COMMIT itself. Before it nothing can
// have taken effect (the transaction is rolled back); a COMMIT that reports
// an error may, rarely, have succeeded.
var ErrUncertain = errors.New("outcome uncertain")

const generationColumns = `id, account_id, COALESCE(key_id, ''), application, surface, model,
	request_type, tier, streamed, finish_reason, prompt_tokens, completion_tokens,
	cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
	cost_micros, latency_ms, generation_time_ms, created_at`

// Generation returns the account's generation with id. An unknown id, or
// one of another account, is ErrNotFound. It reads what is committed: call
// Sync first to see a generation recorded just before.
func (s *Policy) Generation(ctx context.Context, accountID int64, id string) (Generation, error) {
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	g, err := scanGeneration(s.db.Readers().QueryRow(ctx,
		`SELECT `+generationColumns+` FROM generations WHERE id = ? AND account_id = ?`, id, accountID), id)
	return g, s.db.ReadErr(ctx, err)
}

// GenerationByID returns the generation with id, whichever account it
// belongs to. It is for operators (the CLI); callers over HTTP always go
// through Generation, scoped to their account.
func (s *Policy) GenerationByID(ctx context.Context, id string) (Generation, error) {
	return scanGeneration(s.db.Readers().QueryRow(ctx,
		`SELECT `+generationColumns+` FROM generations WHERE id = ?`, id), id)
}

func scanGeneration(row Scanner, id string) (Generation, error) {
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
	g.Cost = money.Micros(cost)
	g.CreatedAt = FromMillis(created)
	return g, nil
}

// BulkBatchRows is the smallest BatchSize that makes a bulk writer.
const BulkBatchRows = 8192

// BulkWriter reports whether a store with batches of up to batchSize
// generations is a bulk writer.
func BulkWriter(batchSize int) bool { return batchSize >= BulkBatchRows }

// The policy's settings, as Init resolved them from Options, and the
// state an engine reads or sets.

// Now is the time of Options.Now.
func (s *Policy) Now() time.Time { return s.now() }

// Logger is Options.Logger (one that discards when none was given).
func (s *Policy) Logger() *slog.Logger { return s.log }

// BatchSize is the most generations committed in one ledger transaction.
func (s *Policy) BatchSize() int { return s.batchSize }

// CommitTimeout bounds one ledger commit.
func (s *Policy) CommitTimeout() time.Duration { return s.commitTimeout }

// QueryTimeout bounds each read on a request's path.
func (s *Policy) QueryTimeout() time.Duration { return s.queryTimeout }

// CommitHook runs Options.CommitHook, if any, just before a ledger
// transaction commits: an error fails the commit.
func (s *Policy) CommitHook() error {
	if s.commitHook == nil {
		return nil
	}
	return s.commitHook()
}

// Pending is how many generations are queued and not yet settled.
func (s *Policy) Pending() int64 { return s.pending.Load() }

// LedgerBusy reports whether the ledger has half a batch or more waiting:
// background work (retention, a backfill) then pauses longer.
func (s *Policy) LedgerBusy() bool { return s.pending.Load() >= int64(max(s.batchSize/2, 1)) }

// RollupsComplete reports whether the usage roll-ups cover every
// generation (see Backfiller).
func (s *Policy) RollupsComplete() bool { return s.rollupsComplete.Load() }

// SetRollupsComplete records whether the usage roll-ups cover every
// generation: an engine born with them sets it at open.
func (s *Policy) SetRollupsComplete(complete bool) { s.rollupsComplete.Store(complete) }

// SetAfterCommit makes the ledger writer call fn after each successful
// commit (SQLite's WAL checkpoint). It is set before StartLedger.
func (s *Policy) SetAfterCommit(fn func()) { s.afterCommit = fn }
