package store

import (
	"bytes"
	"context"
	"database/sql"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"
)

// testClock is an injectable clock that tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTestStore opens a fresh store in t.TempDir() with a test clock and a
// seeded id source, and closes it when the test ends.
func newTestStore(t testing.TB) (*Store, *testClock) {
	t.Helper()
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	return openTestStore(t, path, Options{Now: clock.Now}), clock
}

// openTestStore opens the store at path, filling in a seeded id source when
// opts has none, and closes it when the test ends.
func openTestStore(t testing.TB, path string, opts Options) *Store {
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

// dec parses a decimal literal or fails the test.
func dec(t testing.TB, s string) apd.Decimal {
	t.Helper()
	d, _, err := apd.NewFromString(s)
	if err != nil {
		t.Fatalf("parse decimal %q: %v", s, err)
	}
	return *d
}

// newAccount creates an account with the given credits and one key.
func newAccount(t testing.TB, s DB, name, credits string) (Account, Key, string) {
	t.Helper()
	ctx := context.Background()
	a, created, err := s.EnsureAccount(ctx, name)
	if err != nil || !created {
		t.Fatalf("ensure account %q: created=%v err=%v", name, created, err)
	}
	if credits != "" {
		if a, err = s.AddCredits(ctx, a.ID, dec(t, credits), "test"); err != nil {
			t.Fatalf("add credits: %v", err)
		}
	}
	secret, k, err := s.CreateKey(ctx, a.ID, "")
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return a, k, secret
}

// checkLedger asserts the reconciliation invariant for every account:
// balance = credits - costs and total_used = costs; and that spend_daily
// holds the generations' sums.
func checkLedger(t testing.TB, s DB) {
	t.Helper()
	query(t, s, `
		SELECT a.id, a.balance_micros, a.total_used_micros,
		       (SELECT COALESCE(SUM(amount_micros), 0) FROM credit_transactions c WHERE c.account_id = a.id),
		       (SELECT COALESCE(SUM(cost_micros), 0) FROM generations g WHERE g.account_id = a.id)
		FROM accounts a`, nil, func(r rowScanner) error {
		var id, balance, used, credits, costs int64
		if err := r.Scan(&id, &balance, &used, &credits, &costs); err != nil {
			return err
		}
		if balance != credits-costs || used != costs {
			t.Errorf("account %d: balance %d, total_used %d; credits %d, costs %d", id, balance, used, credits, costs)
		}
		return nil
	})
	spendBad := queryInt(t, s, `
		SELECT COUNT(*) FROM (
			SELECT account_id, COALESCE(key_id, '') AS key_id, created_at / 86400000 AS day,
			       COUNT(*) AS requests, SUM(cost_micros) AS cost
			FROM generations GROUP BY 1, 2, 3
		) g FULL OUTER JOIN spend_daily d USING (account_id, key_id, day)
		WHERE g.cost IS DISTINCT FROM d.cost_micros OR g.requests IS DISTINCT FROM d.requests`)
	if spendBad != 0 {
		t.Errorf("spend_daily disagrees with the generations on %d (account, key, day)s", spendBad)
	}
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
			s, err := Open(context.Background(), p, Options{})
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
	clock := newTestClock()
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

	s1 := openTestStore(t, path, Options{Now: clock.Now})
	a, _, _ := newAccount(t, s1, "acme", "10")
	first, firstSchema := migrations(s1), schema(s1)
	is.True(len(first) >= 1)           // migrations recorded
	is.Equal(first[0][1], "0001_init") // first migration's name
	is.NoErr(s1.Close())               // close first
	is.NoErr(s1.Close())               // close is idempotent

	clock.Advance(time.Hour)
	s2 := openTestStore(t, path, Options{Now: clock.Now})
	is.Equal(migrations(s2), first)   // schema_migrations unchanged on reopen
	is.Equal(schema(s2), firstSchema) // schema unchanged on reopen
	got, err := s2.AccountByID(ctx, a.ID)
	is.NoErr(err)                               // account kept
	is.Equal(got.Balance.String(), "10.000000") // balance kept
}

func TestOpen_RefusesNewerSchema(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, Options{})
	_, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', 0)`)
	is.NoErr(err)       // fake a future migration
	is.NoErr(s.Close()) // close
	_, err = Open(context.Background(), path, Options{})
	is.True(err != nil) // a newer schema is refused
}

// TestCreateKey_SecretNeverStored searches the database file and its WAL,
// open and after close, for the secret.
func TestCreateKey_SecretNeverStored(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "svcgw.db")
		s := openTestStore(t, path, Options{Rand: nil})
		_, k, secret := newAccount(t, s, "acme", "5")
		got, err := s.Authenticate(ctx, secret)
		is.NoErr(err)          // authenticate
		is.Equal(got.ID, k.ID) // the key authenticates
		random := strings.TrimPrefix(secret, SecretPrefix)

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
	})
}
