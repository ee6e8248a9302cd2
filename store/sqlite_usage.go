package store

import (
	"context"
	"database/sql"
	"fmt"
)

// usageBackfilling is Usage's read while a backfill may be running (here
// or in another process): its progress, the roll-ups and the generations
// it has not reached are read in one snapshot, so that every generation is
// counted exactly once.
func (s *Store) usageBackfilling(ctx context.Context, accountID int64, q UsageQuery, scanExpr string, from, to int32) (map[string]*usageSums, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("usage: begin: %w", err)
	}
	defer tx.Rollback()
	bf, err := readBackfill(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	sums, err := usageRollups(ctx, sqlConn{tx}, accountID, q.GroupBy, from, to)
	if err != nil {
		return nil, err
	}
	if bf.complete() {
		s.rollupsComplete.Store(true)
	} else if err := usageScan(ctx, tx, accountID, scanExpr, q, bf, sums); err != nil {
		return nil, err
	}
	return sums, nil
}

// usageScan adds to sums the account's generations in q's window that the
// backfill bf has not rolled up yet.
func usageScan(ctx context.Context, tx *sql.Tx, accountID int64, expr string, q UsageQuery, bf backfill, sums map[string]*usageSums) error {
	where, args := `account_id = ? AND rowid > ? AND rowid <= ?`, []any{accountID, bf.after, bf.through}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, ms(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, ms(q.End))
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
			v      usageSums
		)
		if err := rows.Scan(&bucket, &v.requests, &v.input, &v.output, &v.cached, &v.cacheWrite, &v.reasoning, &v.cost); err != nil {
			return fmt.Errorf("usage: scan: %w", err)
		}
		if sums[bucket] == nil {
			sums[bucket] = &usageSums{}
		}
		sums[bucket].plus(v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("usage: generations not rolled up yet: %w", err)
	}
	return nil
}

// usageByDayBackfilling is UsageByDay's read while a backfill may be
// running: its progress, the roll-ups and the generations it has not
// reached, in one snapshot (see usageBackfilling).
func (s *Store) usageByDayBackfilling(ctx context.Context, accountID int64, q UsageQuery, scanExpr string, from, to int32) (map[dayCell]*usageSums, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("usage by day: begin: %w", err)
	}
	defer tx.Rollback()
	bf, err := readBackfill(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("usage by day: %w", err)
	}
	sums, err := usageDayRollups(ctx, sqlConn{tx}, accountID, q.GroupBy, from, to)
	if err != nil {
		return nil, err
	}
	if bf.complete() {
		s.rollupsComplete.Store(true)
	} else if err := usageDayScan(ctx, tx, accountID, scanExpr, q, bf, sums); err != nil {
		return nil, err
	}
	return sums, nil
}

// usageDayScan adds to sums the account's generations in q's window that
// the backfill bf has not rolled up yet.
func usageDayScan(ctx context.Context, tx *sql.Tx, accountID int64, expr string, q UsageQuery, bf backfill, sums map[dayCell]*usageSums) error {
	where, args := `account_id = ? AND rowid > ? AND rowid <= ?`, []any{accountID, bf.after, bf.through}
	if !q.Start.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, ms(q.Start))
	}
	if !q.End.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, ms(q.End))
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
			c dayCell
			v usageSums
		)
		if err := rows.Scan(&c.day, &c.bucket, &v.requests, &v.input, &v.output, &v.cached, &v.cacheWrite, &v.reasoning, &v.cost); err != nil {
			return fmt.Errorf("usage by day: scan: %w", err)
		}
		if sums[c] == nil {
			sums[c] = &usageSums{}
		}
		sums[c].plus(v)
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
func (s *Store) FollowUsage(fn func(UsageCommit)) (stop func()) {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.follow == nil {
		f.follow = make(map[int]func(UsageCommit))
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
	complete := s.rollupsComplete.Load()
	v := s.feed.version.Load()
	if err := read(); err != nil {
		return v / 2, false, err
	}
	return v / 2, complete && v%2 == 0 && s.feed.version.Load() == v, nil
}
