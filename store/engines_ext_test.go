package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/store/storetest"
)

// The policy's tests that look at its insides (export_test.go) run here,
// on both engines; what every engine must do is the conformance suite's
// (storetest), which each engine's package runs.

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// forEachDB runs test as the subtests "sqlite" and "postgres". Without
// PostgreSQL the second one skips (see pgtest).
func forEachDB(t *testing.T, test func(t *testing.T, open storetest.Opener)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "svcgw.db")
		test(t, func(t testing.TB, opts store.Options) store.DB { return openSQLite(t, path, opts) })
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		test(t, func(t testing.TB, opts store.Options) store.DB { return openPostgres(t, dsn, opts) })
	})
}

// newTestDB opens a fresh database with a test clock.
func newTestDB(t testing.TB, open storetest.Opener) (store.DB, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock()
	return open(t, store.Options{Now: clock.Now}), clock
}

// openSQLite opens the SQLite database at path, with a seeded id source
// when opts has none, and closes it when the test ends.
func openSQLite(t testing.TB, path string, opts store.Options) *sqlite.Store {
	t.Helper()
	if opts.Rand == nil {
		opts.Rand = rand.NewChaCha8([32]byte{1})
	}
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPostgres is openSQLite for PostgreSQL.
func openPostgres(t testing.TB, dsn string, opts store.Options) *postgres.Store {
	t.Helper()
	if opts.Rand == nil {
		opts.Rand = rand.NewChaCha8([32]byte{1})
	}
	p, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Dial opens a DSN with the one registered engine that claims it: a
// postgres:// or postgresql:// URL is PostgreSQL's, anything else that is
// not a URL a SQLite file; a URL of another scheme is no engine's.
func TestDial_PicksTheEngineByDSN(t *testing.T) {
	is := is.New(t)
	for dsn, engine := range map[string]string{
		"svcgw.db": "sqlite", "/var/lib/svcgw/svcgw.db": "sqlite", "postgres://h/db": "postgres",
		"postgresql://u@h:5432/db?sslmode=disable": "postgres", "POSTGRES://h/db": "postgres", "mysql://h/db": "",
	} {
		is.Equal(sqlite.IsDSN(dsn), engine == "sqlite")     // the path is SQLite's
		is.Equal(postgres.IsDSN(dsn), engine == "postgres") // the scheme is PostgreSQL's
	}
	_, err := store.Dial(context.Background(), "mysql://u:pw@h/db", store.Options{})
	is.True(errors.Is(err, store.ErrInvalid))     // no engine claims it
	is.True(!strings.Contains(err.Error(), "pw")) // the password never shows
	db, err := store.Dial(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{})
	is.NoErr(err)
	_, ok := db.(*sqlite.Store)
	is.True(ok) // a file path opens SQLite
	is.NoErr(db.Close())

	is.Equal(store.Redact("postgres://u:pw@h/db"), "postgres://u:xxxxx@h/db")
	is.Equal(store.Redact("postgres://u@h/db?password=pw&sslmode=disable"), "postgres://u@h/db?password=xxxxx&sslmode=disable")
	is.Equal(store.Redact("postgres://u@h/db?sslmode=verify-full&sslkey=k.pem&sslpassword=kp"), "postgres://u@h/db?sslkey=k.pem&sslmode=verify-full&sslpassword=xxxxx")
	is.Equal(store.Redact("svcgw.db"), "svcgw.db")
}
