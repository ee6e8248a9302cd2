package sqlite

import (
	"context"
	"database/sql"

	"github.com/svcgw/svcgw/store"
)

// sqlConn is a conn of database/sql (SQLite): a pool or a transaction.
type sqlConn struct {
	db interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

func (c sqlConn) QueryRow(ctx context.Context, q string, args ...any) store.Scanner {
	return c.db.QueryRowContext(ctx, q, args...)
}

func (c sqlConn) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	r, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

func (c sqlConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sqlRows gives *sql.Rows a Close without a result, like pgx.Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }
