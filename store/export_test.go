package store

import (
	"context"
	"fmt"
	"time"
)

// What the policy's own tests (package store_test, which run it on the
// engines) see of its insides.

// AuthCacheLife is authCacheLife.
const AuthCacheLife = authCacheLife

// AuthCheckedAt is when the authentication cache's last read of the count
// of key changes began.
func (s *Policy) AuthCheckedAt() time.Time {
	s.auth.mu.RLock()
	defer s.auth.mu.RUnlock()
	return s.auth.checked
}

// CommitUncertain queues g as RecordGeneration does, commits it as a batch
// and then marks the batch as one whose COMMIT reported cause: a commit
// that took effect but was reported as failed.
func (s *Policy) CommitUncertain(ctx context.Context, g Generation, cause error) error {
	row, err := s.toRow(g)
	if err != nil {
		return err
	}
	row = s.charges.Record(row)
	s.queue.mu.Lock()
	s.queue.push(row)
	s.pending.Add(1)
	s.queue.mu.Unlock()
	if err := s.db.CommitBatch(ctx, []GenRow{row}, newBatchSums()); err != nil {
		return err
	}
	s.queue.failed(1, fmt.Errorf("ledger: commit: %w: %w", ErrUncertain, cause))
	return nil
}

// FlushQueued commits what is queued as the ledger writer does, by the
// deadline by.
func (s *Policy) FlushQueued(by time.Time) error {
	return s.flush(by, s.queue.peek(nil, 1024), newBatchSums())
}

func newBatchSums() *BatchSums {
	return &BatchSums{Debits: map[int64]int64{}, Spend: map[SpendDay]SpendSum{}}
}
