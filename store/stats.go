package store

import (
	"database/sql"
	"time"
)

// LedgerCommit is one ledger commit attempt, as Options.OnCommit sees it.
type LedgerCommit struct {
	Rows     int           // generations the transaction carried
	Duration time.Duration // from BEGIN to COMMIT's answer (or the failure)
	Err      error         // nil when the rows were committed
}

// LedgerStats is a snapshot of the ledger writer, cheap enough to read at
// every metrics scrape.
type LedgerStats struct {
	// Pending counts the generations answered and not yet committed (the
	// queue's depth); past Limit the ledger is backed up.
	Pending, Limit int64
	// Committed counts the generations committed since Open; Dropped those
	// dropped because they can never be stored (each is logged).
	Committed, Dropped uint64
	// Failing is set while CheckLedger refuses billable calls.
	Failing bool
}

// LedgerStats reports the ledger writer's state now.
func (s *Policy) LedgerStats() LedgerStats {
	return LedgerStats{
		Pending:   s.pending.Load(),
		Limit:     s.queueLimit,
		Committed: s.committed.Load(),
		Dropped:   s.dropped.Load(),
		Failing:   s.ledgerErr() != nil,
	}
}

// Pool is the state of one of the store's connection pools. On
// PostgreSQL the pgx pool's figures fill the same fields: connections open,
// in use, idle and the most allowed, and the acquisitions that had to wait
// for a connection and how long they waited.
type Pool struct {
	Name string // "writer" (the ledger's connection(s)), "readers" (account reads), "call_readers" (the call path's)
	sql.DBStats
}

// observeCommit counts a commit attempt and tells Options.OnCommit of it.
func (s *Policy) observeCommit(rows int, start time.Time, err error) {
	if err == nil {
		s.committed.Add(uint64(rows))
	}
	if s.onCommit != nil {
		s.onCommit(LedgerCommit{Rows: rows, Duration: time.Since(start), Err: err})
	}
}
