package store

import "context"

// engine is what the policy (the ledger writer, authentication and its
// cache, accounts, keys, credits, caps, feedback, usage and retention,
// written once) asks of the database it runs on. Each engine implements it
// with its own connections and SQL; the rules stay above it.
type engine interface {
	// commitBatch inserts the rows, debits their accounts and adds them to
	// spend_daily and the roll-ups, in one transaction. A failure of the
	// COMMIT itself wraps errUncertain.
	commitBatch(ctx context.Context, rows []genRow, agg *batchSums) error
	// storedRow reads the account, cost and creation time of the stored
	// generation id.
	storedRow(ctx context.Context, id string) (acct, cost, created int64, err error)
	// unstorable reports whether err rejects a row as such (committing it
	// again can never succeed), as opposed to a failure of the database.
	unstorable(err error) bool
	// faultReason says in a few words why a commit failed, for operators.
	faultReason(err error) string

	// activeKey reads the active key whose secret hashes to hash, on the
	// call path's connections: ErrNotFound when there is none, an error
	// wrapping ErrUnavailable when the read ran out of time (ctx) or the
	// database could not answer.
	activeKey(ctx context.Context, hash string) (Key, error)
	// keyChanges reads the count of key changes (see authCache), as
	// activeKey reads.
	keyChanges(ctx context.Context) (int64, error)
	// budgetRow reads budgetSQL for the account on the call path's
	// connections; no account is sql.ErrNoRows.
	budgetRow(ctx context.Context, accountID int64) scanner

	// readers is the pool of account reads and commands.
	readers() conn
	// writeTx runs fn in a write transaction, committed when fn returns
	// nil; what names the change in the errors of its begin and commit.
	writeTx(ctx context.Context, what string, fn func(tx conn) error) error
	// readErr marks err, from a read run under readCtx, as ErrUnavailable
	// when the read ran out of time or the database could not answer.
	readErr(ctx context.Context, err error) error
	// dialect is the engine's variant of the policy's queries.
	dialect() dialect
}

var (
	_ engine = (*Store)(nil)
	_ engine = (*Postgres)(nil)
)
