package store

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcgw/svcgw/internal/pgtest"
)

// The store's tests run against both databases: a test that takes an
// opener runs once on SQLite and once on PostgreSQL (forEachDB), and only
// what is particular to one engine (SQLite's WAL and files, PostgreSQL's
// instances and leases) is tested on that one alone.

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// opener opens the test's database (the same one each time it is called
// within a test) with opts, filling in a seeded id source when opts has
// none, and closes it when the test ends.
type opener func(t testing.TB, opts Options) DB

// forEachDB runs test as the subtests "sqlite" and "postgres". Without
// PostgreSQL the second one skips (see pgtest).
func forEachDB(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "svcgw.db")
		test(t, func(t testing.TB, opts Options) DB { return openTestStore(t, path, opts) })
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		test(t, func(t testing.TB, opts Options) DB { return openTestPostgres(t, dsn, opts) })
	})
}

// openTestPostgres is openTestStore for PostgreSQL.
func openTestPostgres(t testing.TB, dsn string, opts Options) *Postgres {
	t.Helper()
	if opts.Rand == nil {
		opts.Rand = rand.NewChaCha8([32]byte{1})
	}
	p, err := OpenPostgres(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newTestDB opens a fresh database with a test clock.
func newTestDB(t testing.TB, open opener) (DB, *testClock) {
	t.Helper()
	clock := newTestClock()
	return open(t, Options{Now: clock.Now}), clock
}

// engineSQL picks the query text of db's engine, for the few checks whose
// SQL differs.
func engineSQL(db DB, sqlite, postgres string) string {
	if _, ok := db.(*Postgres); ok {
		return postgres
	}
	return sqlite
}

// query runs a read on db's reader pool, with ? placeholders on either
// engine, and calls scan for each row.
func query(t testing.TB, db DB, q string, args []any, scan func(rowScanner) error) {
	t.Helper()
	var (
		rows interface {
			rowScanner
			Close()
		}
		err error
	)
	switch db := db.(type) {
	case *Store:
		var r *sql.Rows
		r, err = db.r.Query(q, args...)
		if err == nil {
			rows = sqlRows{r}
		}
	case *Postgres:
		rows, err = db.r.Query(context.Background(), pgq(q), args...)
	default:
		t.Fatalf("query: unknown store %T", db)
	}
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatalf("query %s: scan: %v", q, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
}

// queryInt runs a query of one integer.
func queryInt(t testing.TB, db DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	query(t, db, q, args, func(r rowScanner) error { return r.Scan(&n) })
	return n
}

// execSQL runs a write on db's writer, with ? placeholders on either
// engine.
func execSQL(t testing.TB, db DB, q string, args ...any) {
	t.Helper()
	var err error
	switch db := db.(type) {
	case *Store:
		_, err = db.w.Exec(q, args...)
	case *Postgres:
		_, err = db.w.Exec(context.Background(), pgq(q), args...)
	default:
		t.Fatalf("exec: unknown store %T", db)
	}
	if err != nil {
		t.Fatalf("exec %s: %v", q, err)
	}
}
