package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// newTestStore opens a fresh store in t.TempDir() with a test clock and a
// seeded id source, and closes it when the test ends.
func newTestStore(t testing.TB) (*Store, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	return openTestStore(t, path, store.Options{Now: clock.Now}), clock
}

// openTestStore opens the store at path, filling in a seeded id source when
// opts has none, and closes it when the test ends.
func openTestStore(t testing.TB, path string, opts store.Options) *Store {
	t.Helper()
	if opts.Rand == nil {
		opts.Rand = rand.NewChaCha8([32]byte{1})
	}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpen_WALAndPragmas(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	for name, db := range map[string]*sql.DB{"writer": s.w, "reader": s.r, "call-path reader": s.call} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			var mode string
			var fk, busy int
			is.NoErr(db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)) // journal mode
			is.NoErr(db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))   // foreign keys
			is.NoErr(db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy)) // busy timeout
			is.Equal(mode, "wal")                                                // WAL mode
			is.Equal(fk, 1)                                                      // foreign keys on
			is.Equal(busy, 5000)                                                 // busy timeout
		})
	}
	for _, db := range []*sql.DB{s.r, s.call} {
		_, err := db.ExecContext(ctx, `INSERT INTO accounts (name, created_at) VALUES ('x', 0)`)
		is.New(t).True(err != nil) // the reader pools are read-only
	}
}

func TestOpen_RejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "a?b"} {
		t.Run(p, func(t *testing.T) {
			is := is.New(t)
			s, err := Open(context.Background(), p, store.Options{})
			if err == nil {
				s.Close()
			}
			is.True(err != nil) // a path without a WAL-capable file is refused
		})
	}
}

func TestOpen_MigrationsIdempotent(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")

	migrations := func(s *Store) [][3]any {
		rows, err := s.r.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
		is.NoErr(err) // list migrations
		defer rows.Close()
		var out [][3]any
		for rows.Next() {
			var v, at int64
			var n string
			is.NoErr(rows.Scan(&v, &n, &at)) // scan migration
			out = append(out, [3]any{v, n, at})
		}
		is.NoErr(rows.Err()) // iterate migrations
		return out
	}
	schema := func(s *Store) string {
		rows, err := s.r.QueryContext(ctx, `SELECT COALESCE(sql, '') FROM sqlite_schema ORDER BY name`)
		is.NoErr(err) // read schema
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var q string
			is.NoErr(rows.Scan(&q)) // scan schema
			b.WriteString(q + "\n")
		}
		return b.String()
	}

	s1 := openTestStore(t, path, store.Options{Now: clock.Now})
	a, _, _ := storetest.NewAccount(t, s1, "acme", "10")
	first, firstSchema := migrations(s1), schema(s1)
	is.True(len(first) >= 1)           // migrations recorded
	is.Equal(first[0][1], "0001_init") // first migration's name
	is.NoErr(s1.Close())               // close first
	is.NoErr(s1.Close())               // close is idempotent

	clock.Advance(time.Hour)
	s2 := openTestStore(t, path, store.Options{Now: clock.Now})
	is.Equal(migrations(s2), first)   // schema_migrations unchanged on reopen
	is.Equal(schema(s2), firstSchema) // schema unchanged on reopen
	got, err := s2.AccountByID(ctx, a.ID)
	is.NoErr(err)                               // account kept
	is.Equal(got.Balance.String(), "10.000000") // balance kept
}

func TestOpen_RefusesNewerSchema(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{})
	_, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', 0)`)
	is.NoErr(err)       // fake a future migration
	is.NoErr(s.Close()) // close
	_, err = Open(context.Background(), path, store.Options{})
	is.True(err != nil) // a newer schema is refused
}

// TestCreateKey_SecretNeverStored searches the database file and its WAL,
// open and after close, for the secret.
func TestCreateKey_SecretNeverStored(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{Rand: nil})
	_, k, secret := storetest.NewAccount(t, s, "acme", "5")
	got, err := s.Authenticate(ctx, secret)
	is.NoErr(err)          // authenticate
	is.Equal(got.ID, k.ID) // the key authenticates
	random := strings.TrimPrefix(secret, store.SecretPrefix)

	search := func(when string) {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(path + suffix)
			if os.IsNotExist(err) {
				continue
			}
			is.NoErr(err) // read database file
			if bytes.Contains(b, []byte(random)) {
				t.Errorf("%s: secret found in %s", when, filepath.Base(path+suffix))
			}
		}
	}
	search("open")
	_, err = s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	is.NoErr(err) // checkpoint
	search("checkpointed")
	is.NoErr(s.Close()) // close
	search("closed")

	b, err := os.ReadFile(path)
	is.NoErr(err)                                          // read database
	is.True(bytes.Contains(b, []byte(hashSecret(secret)))) // the hash is what is stored
}

// hashSecret is the stored form of a secret: SHA-256, lowercase hex.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
