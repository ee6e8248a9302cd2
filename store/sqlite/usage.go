package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/svcgw/svcgw/store"
)

// scanExprs maps each grouping to the SQL expression of its bucket over
// generations, for the generations a roll-up backfill has not reached yet
// (see store.Backfiller). Only these fixed strings ever reach the query
// text.
var scanExprs = map[string]string{
	store.GroupByDay:         `strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')`,
	store.GroupByRequestType: `request_type`,
	store.GroupByApplication: `application`,
	store.GroupByAPIKey:      `COALESCE(key_id, '')`,
}

// UsageBackfilling is Usage's read while a backfill may be running (here
// or in another process): its progress, the roll-ups and the generations
// it has not reached are read in one snapshot, so that every generation is
// counted exactly once.
func (s *Store) UsageBackfilling(ctx context.Context, accountID int64, q store.UsageQuery, from, to int32) (map[string]*store.UsageSums, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("usage: begin: %w", err)
	}
	defer tx.Rollback()
	bf, err := readBackfill(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	sums, err := store.UsageRollups(ctx, sqlConn{tx}, accountID, q.GroupBy, from, to)
	if err != nil {
		return nil, err
	}
	if bf.complete() {
		s.SetRollupsComplete(true)
	} else if err := usageScan(ctx, tx, accountID, scanExprs[q.GroupBy], q, bf, sums); err != nil {
		return nil, err
	}
	return sums, nil
}

// usageScan adds to sums the account's generations in q's window that the
// backfill bf has not rolled up yet.
func usageScan(ctx context.Context, tx *sql.Tx, accountID int64, expr string, q store.UsageQuery, bf backfill, sums map[string]*store.UsageSums) error {
	where, args := `account_id = ? AND rowid > ? AND rowid <= ?`, []any{accountID, bf.after, bf.through}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, store.Millis(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, store.Millis(q.End))
	}
	rows, err := tx.QueryContext(ctx,
		`SELECT `+expr+` AS bucket, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),
		        SUM(cached_prompt_tokens), SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros)
		 FROM generations WHERE `+where+` GROUP BY bucket`,
		args...)
	if err != nil {
		return fmt.Errorf("usage: generations not rolled up yet: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			bucket string
			v      store.UsageSums
		)
		if err := rows.Scan(&bucket, &v.Requests, &v.Input, &v.Output, &v.Cached, &v.CacheWrite, &v.Reasoning, &v.Cost); err != nil {
			return fmt.Errorf("usage: scan: %w", err)
		}
		if sums[bucket] == nil {
			sums[bucket] = &store.UsageSums{}
		}
		sums[bucket].Plus(v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("usage: generations not rolled up yet: %w", err)
	}
	return nil
}

// UsageByDayBackfilling is UsageByDay's read while a backfill may be
// running: its progress, the roll-ups and the generations it has not
// reached, in one snapshot (see UsageBackfilling).
func (s *Store) UsageByDayBackfilling(ctx context.Context, accountID int64, q store.UsageQuery, from, to int32) (map[store.DayCell]*store.UsageSums, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("usage by day: begin: %w", err)
	}
	defer tx.Rollback()
	bf, err := readBackfill(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	sums, err := store.UsageDayRollups(ctx, sqlConn{tx}, accountID, q.GroupBy, from, to)
	if err != nil {
		return nil, err
	}
	if bf.complete() {
		s.SetRollupsComplete(true)
	} else if err := usageDayScan(ctx, tx, accountID, scanExprs[q.GroupBy], q, bf, sums); err != nil {
		return nil, err
	}
	return sums, nil
}

// usageDayScan adds to sums the account's generations in q's window that
// the backfill bf has not rolled up yet.
func usageDayScan(ctx context.Context, tx *sql.Tx, accountID int64, expr string, q store.UsageQuery, bf backfill, sums map[store.DayCell]*store.UsageSums) error {
	where, args := `account_id = ? AND rowid > ? AND rowid <= ?`, []any{accountID, bf.after, bf.through}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, store.Millis(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, store.Millis(q.End))
	}
	rows, err := tx.QueryContext(ctx,
		`SELECT created_at / 86400000 AS day, `+expr+` AS bucket, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),
		        SUM(cached_prompt_tokens), SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros)
		 FROM generations WHERE `+where+` GROUP BY day, bucket`,
		args...)
	if err != nil {
		return fmt.Errorf("usage by day: generations not rolled up yet: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			c store.DayCell
			v store.UsageSums
		)
		if err := rows.Scan(&c.Day, &c.Bucket, &v.Requests, &v.Input, &v.Output, &v.Cached, &v.CacheWrite, &v.Reasoning, &v.Cost); err != nil {
			return fmt.Errorf("usage by day: scan: %w", err)
		}
		if sums[c] == nil {
			sums[c] = &store.UsageSums{}
		}
		sums[c].Plus(v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("usage by day: generations not rolled up yet: %w", err)
	}
	return nil
}

// FollowUsage calls fn with every ledger commit from now on, in order, on
// the ledger writer's goroutine, after the commit has succeeded (or its
// outcome has become unknown: UsageCommit.Lost) and before the Syncs
// waiting for it return. fn must return quickly: the writer waits for it.
// stop ends the calls.
func (s *Store) FollowUsage(fn func(store.UsageCommit)) (stop func()) {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.follow == nil {
		f.follow = make(map[int]func(store.UsageCommit))
	}
	id := f.next
	f.next++
	f.follow[id] = fn
	f.hasAny.Store(true)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.follow, id)
		f.hasAny.Store(len(f.follow) > 0)
	}
}

// ReadUsage runs read, which reads usage (Usage, UsageByDay), and reports
// which ledger state it saw: one that holds every commit through seq (the
// UsageCommit.Seq of the last commit told before read began, 0 for none
// since Open), and exactly those when exact is set: no COMMIT ran while it
// read, and the roll-ups are complete (no backfill is running, whose chunks
// the feed does not tell). An answer read with exact set, plus the deltas
// of every commit after seq, is the answer a read after those commits
// would give. Without exact the answer is still right for any reader
// that needs no commit after seq; it only cannot be kept.
//
// Each of Usage's and UsageByDay's answers is one SQL statement, so one
// snapshot; read must make one such call for exact to mean anything.
func (s *Store) ReadUsage(read func() error) (seq uint64, exact bool, err error) {
	complete := s.RollupsComplete()
	v := s.feed.version.Load()
	if err := read(); err != nil {
		return v / 2, false, err
	}
	return v / 2, complete && v%2 == 0 && s.feed.version.Load() == v, nil
}

// usageFeed is the Store's usage feed.
type usageFeed struct {
	// version is twice the commits told, plus one while a COMMIT is in
	// flight (between committing and committed).
	version atomic.Uint64

	mu     sync.Mutex
	follow map[int]func(store.UsageCommit)
	next   int
	hasAny atomic.Bool // follow is not empty
}

// committing marks a COMMIT in flight: reads overlapping it cannot tell
// whether they saw it.
func (f *usageFeed) committing() { f.version.Add(1) }

// committed tells the followers of the commit that committing began: rs
// holds its roll-up sums, or is nil when its outcome is unknown.
func (f *usageFeed) committed(rs *store.RollupSums) {
	defer f.version.Add(1)
	if !f.hasAny.Load() {
		return
	}
	c := store.UsageCommit{Seq: f.version.Load()/2 + 1, Lost: rs == nil}
	if rs != nil {
		c.Deltas = make([]store.UsageDelta, 0, len(rs.Daily))
		for k, v := range rs.Daily {
			c.Deltas = append(c.Deltas, store.UsageDelta{
				AccountID: k.Account, Day: k.Day, KeyID: k.Key, Application: k.App, RequestType: k.Type,
				Requests: v.Requests, InputTokens: v.Input, OutputTokens: v.Output, CachedInputTokens: v.Cached,
				CacheWriteTokens: v.CacheWrite, ReasoningTokens: v.Reasoning, CostMicros: v.Cost,
			})
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fn := range f.follow {
		fn(c)
	}
}
