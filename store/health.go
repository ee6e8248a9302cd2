package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ledgerHealth is what CheckLedger reads on every billable call: atomics
// the ledger writer sets, so the check costs no lock.
type ledgerHealth struct {
	// commitStart is s.mono() when the running commit began; 0: none.
	commitStart atomic.Int64
	// fault is set while the ledger is failing: from a commit that failed
	// until one succeeds.
	fault atomic.Pointer[ledgerFault]
	// incident is set from the moment CheckLedger first refuses until it
	// admits again; it is what the two log lines of an incident report.
	incident atomic.Pointer[incident]
}

// ledgerFault is a failing ledger: since when, and the last error.
type ledgerFault struct {
	since time.Time
	err   error
}

// incident is one stretch of time in which CheckLedger refuses calls.
type incident struct {
	start   time.Time    // when the ledger stopped keeping up, as far as known
	held    atomic.Int64 // the most generations held in memory at once
	refused atomic.Int64 // calls CheckLedger refused
}

// hold raises the incident's most generations held to n if it is more.
func (inc *incident) hold(n int64) {
	for {
		old := inc.held.Load()
		if n <= old || inc.held.CompareAndSwap(old, n) {
			return
		}
	}
}

// mono is a monotonic clock reading, never zero.
func (s *Policy) mono() int64 { return int64(time.Since(s.epoch)) + 1 }

// CheckLedger reports whether the ledger can take more generations. It is
// nil while the ledger keeps up; otherwise it wraps ErrUnavailable and says
// why:
//
//   - failing: the last commit failed (the disk full, the database locked
//     by another process past CommitTimeout, an I/O error), and no commit
//     has succeeded since;
//   - stalled: a commit has been running for longer than CommitTimeout;
//   - backed up: more than QueueSize generations are waiting.
//
// The server calls it once per billable call, before admitting it, and
// refuses the call when it fails; each refusal is counted for the log. An
// incident (from the first failed commit or refusal until CheckLedger
// admits again) logs one Error line when it begins, with the reason and the
// number of generations held in memory, and one Warn line when it ends,
// with how long it lasted, the most generations held and the calls refused.
// Nothing is logged per call.
//
// Refusing is what bounds the memory of generations held while the
// database fails: once CheckLedger fails no call is admitted, so the queue
// grows only by the calls already admitted, each of which records one
// generation. While it admits, the queue holds at most QueueSize (past
// that it is backed up), so it never holds more than QueueSize plus the
// calls in flight when it began refusing: about 4,096 × 0.5 KiB plus the
// calls in flight with the defaults.
func (s *Policy) CheckLedger() error {
	err := s.ledgerErr()
	if err != nil {
		inc := s.startIncident(err, s.troubleSince())
		inc.refused.Add(1)
		inc.hold(s.pending.Load())
	}
	return err
}

// ledgerErr is CheckLedger without the counting.
func (s *Policy) ledgerErr() error {
	if err := s.ledgerFault(); err != nil {
		return err
	}
	if n := s.pending.Load(); n > s.queueLimit {
		return fmt.Errorf("%w: the ledger is backed up: %d generations are waiting to be recorded (the limit is %d)",
			ErrUnavailable, n, s.queueLimit)
	}
	return nil
}

// ledgerFault is ledgerErr for a failing or stalled ledger only: one that
// is not committing, as opposed to one that is behind.
func (s *Policy) ledgerFault() error {
	if f := s.health.fault.Load(); f != nil {
		return fmt.Errorf("%w: the ledger has been failing since %s (%s): %w",
			ErrUnavailable, f.since.UTC().Format(time.RFC3339), s.db.FaultReason(f.err), f.err)
	}
	if start := s.health.commitStart.Load(); start != 0 {
		if d := time.Duration(s.mono() - start); d > s.commitTimeout {
			return fmt.Errorf("%w: a ledger commit has been running for %s (is another process holding the database's write lock?)",
				ErrUnavailable, d.Round(time.Millisecond))
		}
	}
	return nil
}

// troubleSince is when the ledger stopped keeping up, as far as is known:
// when the failing (or still running) commit began, or now.
func (s *Policy) troubleSince() time.Time {
	if f := s.health.fault.Load(); f != nil {
		return f.since
	}
	now := time.Now()
	if start := s.health.commitStart.Load(); start != 0 {
		return now.Add(-time.Duration(s.mono() - start))
	}
	return now
}

// startIncident returns the incident in progress, starting (and logging)
// one that began at since if there is none.
func (s *Policy) startIncident(cause error, since time.Time) *incident {
	for {
		if inc := s.health.incident.Load(); inc != nil {
			return inc
		}
		inc := &incident{start: since}
		held := s.pending.Load()
		inc.held.Store(held)
		if s.health.incident.CompareAndSwap(nil, inc) {
			s.log.Error("ledger cannot record generations: refusing billable calls until it recovers",
				"held", held, "error", cause)
			return inc
		}
	}
}

// ledgerFailed marks the ledger failing after a commit that began at
// attempt failed with err: CheckLedger refuses from now on, and waiting
// Syncs are answered.
func (s *Policy) ledgerFailed(err error, attempt time.Time) {
	since := attempt // a commit that timed out was failing from its start
	if f := s.health.fault.Load(); f != nil {
		since = f.since
	}
	s.health.fault.Store(&ledgerFault{since: since, err: err})
	s.startIncident(s.ledgerErr(), since).hold(s.pending.Load())
	s.queue.failWaiters(s.ledgerFault())
}

// ledgerCommitted clears the fault after a commit succeeded, and ends the
// incident once CheckLedger would admit again.
func (s *Policy) ledgerCommitted() {
	if s.health.fault.Load() != nil {
		s.health.fault.Store(nil)
	}
	inc := s.health.incident.Load()
	if inc == nil || s.ledgerErr() != nil {
		return
	}
	if s.health.incident.CompareAndSwap(inc, nil) {
		s.log.Warn("ledger recovered: billable calls are admitted again",
			"lasted", time.Since(inc.start).Round(time.Millisecond).String(),
			"held_max", inc.held.Load(), "refused", inc.refused.Load(),
			"still_queued", s.pending.Load())
	}
}

// Health is the state of the database for a readiness probe.
type Health struct {
	// Database is nil when a read answered within a second.
	Database error
	// Ledger is CheckLedger's answer: nil while the ledger keeps up.
	Ledger error
	// Leases is, on PostgreSQL, why this instance admits no call from its
	// balance leases: its liveness lock is not held, or no heartbeat kept
	// them live for most of a lease TTL. Nil while they may be spent, on
	// SQLite, and in a process that serves no calls (no Admission).
	Leases error
	// Pending is how many answered generations are not yet committed.
	Pending int64
}

// Ready reports whether the database can serve billable calls.
func (h Health) Ready() bool { return h.Database == nil && h.Ledger == nil && h.Leases == nil }

// healthTimeout bounds Health's read.
const healthTimeout = time.Second

// Health checks the database for a readiness probe: that a read answers,
// and that the ledger keeps up (see CheckLedger, whose incident it starts
// too, so a failing ledger is logged even when no call comes). It counts
// no refusal.
func (s *Policy) Health(ctx context.Context) Health {
	h := Health{Ledger: s.ledgerErr(), Pending: s.pending.Load()}
	if h.Ledger != nil {
		s.startIncident(h.Ledger, s.troubleSince())
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	var n int
	if err := s.db.Readers().QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		h.Database = fmt.Errorf("%w: a read did not answer: %w", ErrUnavailable, err)
	}
	return h
}

// ErrQueryTimeout is the cause of a read's own deadline (QueryTimeout).
var ErrQueryTimeout = errors.New("query timeout")

// ReadCtx bounds a read on a request's path by QueryTimeout.
func (s *Policy) ReadCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.queryTimeout, ErrQueryTimeout)
}
