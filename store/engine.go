package store

import "context"

// Engine is what the policy (the ledger writer, authentication and its
// cache, accounts, keys, credits, caps, feedback, usage and retention,
// written once) asks of the database it runs on. Each engine implements it
// with its own connections and SQL; the rules stay above it.
type Engine interface {
	// CommitBatch inserts the rows, debits their accounts and adds them to
	// spend_daily and the roll-ups, in one transaction. A failure of the
	// COMMIT itself wraps ErrUncertain.
	CommitBatch(ctx context.Context, rows []GenRow, agg *BatchSums) error
	// StoredRow reads the account, cost and creation time of the stored
	// generation id.
	StoredRow(ctx context.Context, id string) (acct, cost, created int64, err error)
	// Unstorable reports whether err rejects a row as such (committing it
	// again can never succeed), as opposed to a failure of the database.
	Unstorable(err error) bool
	// FaultReason says in a few words why a commit failed, for operators.
	FaultReason(err error) string

	// ActiveKey reads the active key whose secret hashes to hash, on the
	// call path's connections: ErrNotFound when there is none, an error
	// wrapping ErrUnavailable when the read ran out of time (ctx) or the
	// database could not answer.
	ActiveKey(ctx context.Context, hash string) (Key, error)
	// KeyChanges reads the count of key changes (see authCache), as
	// ActiveKey reads.
	KeyChanges(ctx context.Context) (int64, error)
	// BudgetRow reads BudgetSQL for the account on the call path's
	// connections; no account is sql.ErrNoRows.
	BudgetRow(ctx context.Context, accountID int64) Scanner

	// Readers is the pool of account reads and commands.
	Readers() Conn
	// WriteTx runs fn in a write transaction, committed when fn returns
	// nil; what names the change in the errors of its begin and commit.
	WriteTx(ctx context.Context, what string, fn func(tx Conn) error) error
	// ReadErr marks err, from a read run under ReadCtx, as ErrUnavailable
	// when the read ran out of time or the database could not answer.
	ReadErr(ctx context.Context, err error) error
	// Dialect is the engine's variant of the policy's queries.
	Dialect() Dialect
}
