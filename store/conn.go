package store

import (
	"context"
	"database/sql"
)

// conn is a connection pool or a transaction of either engine, for the
// queries the policy writes once: their text uses ? placeholders (the
// PostgreSQL engine rewrites them, pgq), and a query that finds no row
// fails with sql.ErrNoRows on both.
type conn interface {
	queryRow(ctx context.Context, q string, args ...any) scanner
	query(ctx context.Context, q string, args ...any) (rows, error)
	// exec runs a statement and reports how many rows it changed.
	exec(ctx context.Context, q string, args ...any) (int64, error)
}

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// rows is a query's result, read row by row.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// dialect is what differs in the text of the queries the policy writes
// once.
type dialect struct {
	// forUpdate ends a read, in a write transaction, of rows the
	// transaction then changes: " FOR UPDATE" on PostgreSQL, which locks
	// them against other writers; nothing on SQLite, whose write
	// transaction holds the whole database.
	forUpdate string
	// keyOrder orders api_keys k of the same created_at by insertion.
	keyOrder string
}

// sqlConn is a conn of database/sql (SQLite): a pool or a transaction.
type sqlConn struct {
	db interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

func (c sqlConn) queryRow(ctx context.Context, q string, args ...any) scanner {
	return c.db.QueryRowContext(ctx, q, args...)
}

func (c sqlConn) query(ctx context.Context, q string, args ...any) (rows, error) {
	r, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

func (c sqlConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sqlRows gives *sql.Rows a Close without a result, like pgx.Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }
