package store

import "context"

// engine is what the policy shared by every database (ledgerCore: the
// ledger writer, authentication and its cache) asks of the one it runs
// on. Each engine implements it with its own SQL; the rules stay above it.
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
}

var (
	_ engine = (*Store)(nil)
	_ engine = (*Postgres)(nil)
)
