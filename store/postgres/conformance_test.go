package postgres

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestConformance runs the engine contract's suite on PostgreSQL, each
// test on a new database. Without PostgreSQL it skips (see pgtest).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dsn := pgtest.DSN(t)
		return func(t testing.TB, opts store.Options) store.DB { return openTestPostgres(t, dsn, opts) }
	})
}

// openTestPostgres opens the database dsn names, filling in a seeded id
// source when opts has none, and closes it when the test ends.
func openTestPostgres(t testing.TB, dsn string, opts store.Options) *Store {
	t.Helper()
	if opts.Rand == nil {
		opts.Rand = rand.NewChaCha8([32]byte{1})
	}
	p, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
