package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/svcgw/svcgw/store"
)

// How the policy's queries run on PostgreSQL: the engine's conn (pgConn,
// pgq), write transactions, and the reads of the call path.

// pgDialect is PostgreSQL's (see dialect).
var pgDialect = store.Dialect{Name: "postgres", ForUpdate: " FOR UPDATE", KeyOrder: "k.seq"}

func (p *Store) Dialect() store.Dialect { return pgDialect }

// Readers is the pool of account reads and commands.
func (p *Store) Readers() store.Conn { return pgConn{p.r} }

// WriteTx runs fn in a transaction on the writer pool, and commits it
// when fn returns nil. what names the change in errors.
func (p *Store) WriteTx(ctx context.Context, what string, fn func(tx store.Conn) error) error {
	tx, err := p.w.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback(ctx)
	if err := fn(pgConn{tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// pgConn is a conn of pgx: a pool or a transaction. It rewrites the
// queries' placeholders (pgq) and reports no row as sql.ErrNoRows.
type pgConn struct{ db pgQuerier }

// pgQuerier is what pgx's pools and transactions have in common.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (c pgConn) QueryRow(ctx context.Context, q string, args ...any) store.Scanner {
	return pgRow{c.db.QueryRow(ctx, pgq(q), args...)}
}

func (c pgConn) Query(ctx context.Context, q string, args ...any) (store.Rows, error) {
	return c.db.Query(ctx, pgq(q), args...)
}

func (c pgConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.db.Exec(ctx, pgq(q), args...)
	return tag.RowsAffected(), err
}

// pgRow reports pgx's no row as sql.ErrNoRows.
type pgRow struct{ pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if noRows(err) {
		return sql.ErrNoRows
	}
	return err
}

// pgq rewrites a query written with SQLite's ? placeholders into
// PostgreSQL's $1, $2, …: the queries both databases run alike are written
// once. None of them has a ? inside a literal.
func pgq(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// pgBudgetSQL is BudgetSQL with PostgreSQL's placeholders.
var pgBudgetSQL = pgq(store.BudgetSQL)

// BudgetRow reads BudgetSQL for the account, on the call path's pool.
func (p *Store) BudgetRow(ctx context.Context, accountID int64) store.Scanner {
	return pgRow{p.call.QueryRow(ctx, pgBudgetSQL, accountID)}
}

// KeyChanges reads the count of key changes (see authCache).
func (p *Store) KeyChanges(ctx context.Context) (int64, error) {
	var n int64
	err := p.call.QueryRow(ctx, store.KeyChangesSQL).Scan(&n)
	return n, p.ReadErr(ctx, err)
}

// pgKeySQL is KeySQL with PostgreSQL's placeholders.
var pgKeySQL = pgq(store.KeySQL)

// ActiveKey reads the active key whose secret hashes to hash, on the call
// path's pool.
func (p *Store) ActiveKey(ctx context.Context, hash string) (store.Key, error) {
	k, err := store.ScanKey(p.call.QueryRow(ctx, pgKeySQL, hash))
	if noRows(err) {
		return store.Key{}, store.ErrNotFound
	}
	return k, p.ReadErr(ctx, err)
}
