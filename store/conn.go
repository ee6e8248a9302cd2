package store

import (
	"context"
)

// Conn is a connection pool or a transaction of either engine, for the
// queries the policy writes once: their text uses ? placeholders (the
// PostgreSQL engine rewrites them, pgq), and a query that finds no row
// fails with sql.ErrNoRows on both.
type Conn interface {
	QueryRow(ctx context.Context, q string, args ...any) Scanner
	Query(ctx context.Context, q string, args ...any) (Rows, error)
	// Exec runs a statement and reports how many rows it changed.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
}

// Scanner is what *sql.Row and *sql.Rows have in common.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows is a query's result, read row by row.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Dialect is what differs in the text of the queries the policy writes
// once.
type Dialect struct {
	// Name names the engine's SQL: "sqlite", "postgres". The conformance
	// suite (storetest) picks by it the text of its few checks whose SQL
	// differs.
	Name string
	// ForUpdate ends a read, in a write transaction, of rows the
	// transaction then changes: " FOR UPDATE" on PostgreSQL, which locks
	// them against other writers; nothing on SQLite, whose write
	// transaction holds the whole database.
	ForUpdate string
	// KeyOrder orders api_keys k of the same created_at by insertion.
	KeyOrder string
}
