package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// openLegacyDB creates a database at path with the schema svcgw had before
// the roll-ups (migration 0001 only), the way that version created it.
func openLegacyDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path+"?"+dsnPragmas+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		t.Fatal(err)
	}
	ms, err := sqliteMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Version != 1 {
		t.Fatalf("first migration is %s", ms[0].Name)
	}
	if err := store.Migrate(ctx, sqliteMigrator{db}, ms[:1], time.Now, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return db
}

// legacyCopy makes a database of the schema before the roll-ups holding
// the accounts, keys, credits, generations, spend and feedback of src (a
// store's file), as the ledger of that version had written them.
func legacyCopy(t testing.TB, src, path string) {
	t.Helper()
	db := openLegacyDB(t, path)
	if _, err := db.Exec(`ATTACH DATABASE ? AS src`, src); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"accounts", "api_keys", "credit_transactions", "generations", "spend_daily", "feedback"} {
		// The columns the legacy schema has (later migrations added
		// some to the source's).
		var cols string
		if err := db.QueryRow(`SELECT group_concat(name, ', ') FROM pragma_table_info(?, 'main')`, table).Scan(&cols); err != nil {
			t.Fatal(err)
		}
		q := `INSERT INTO main.` + table + ` SELECT ` + cols + ` FROM src.` + table
		if table == "generations" {
			q += ` ORDER BY rowid` // rowids as the old ledger gave them
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	if _, err := db.Exec(`DETACH DATABASE src`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBackfill_DatabaseFromBeforeRollups(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))

	// A store of today's schema writes a realistic ledger, which is copied
	// into a database of the previous schema.
	src, clock := newTestStore(t)
	accounts := storetest.RandomWorkload(t, src, clock, r, 1200)
	is.NoErr(src.Close())
	legacy := filepath.Join(dir, "legacy.db")
	legacyCopy(t, src.path, legacy)

	s := openTestStore(t, legacy, store.Options{Now: clock.Now})
	b, err := readBackfill(ctx, s.r)
	is.NoErr(err)
	is.Equal(b.after, int64(0))                       // nothing rolled up by the migration itself
	is.Equal(b.through, int64(1200))                  // every generation of the old version is to do
	is.True(!s.RollupsComplete())                     // usage knows it
	storetest.CheckAllUsage(t, s, r, accounts[:2], 0) // exact before the backfill starts: roll-ups + scan
	var rolled int
	is.NoErr(s.r.QueryRow(`SELECT COUNT(*) FROM usage_daily`).Scan(&rolled))
	is.Equal(rolled, 0) // nothing rolled up yet

	// Part of the way through, with new calls recorded meanwhile: they are
	// rolled up by the ledger, the old ones by the backfill, each once.
	var rs store.RollupSums
	ch, err := s.backfillChunk(ctx, 500, 1_000_000, &rs, nil)
	is.NoErr(err)
	is.Equal(ch.rolled, 500)
	is.Equal(ch.left, int64(700))
	k := store.Key{AccountID: accounts[0].ID}
	for i := range 50 {
		clock.Set(time.Date(2025, 3, 25, 10, i, 0, 0, time.UTC))
		g := storetest.Gen(t, fmt.Sprint("new-", i), k, "0.25")
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	storetest.CheckAllUsage(t, s, r, accounts[:2], 0) // exact halfway

	// A restart halfway resumes where the backfill stopped.
	is.NoErr(s.Close())
	s = openTestStore(t, legacy, store.Options{Now: clock.Now})
	is.True(!s.RollupsComplete())
	is.NoErr(s.StartUpkeep(store.UpkeepOptions{ChunkTime: time.Millisecond}))
	deadline := time.Now().Add(time.Minute)
	for !s.RollupsComplete() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	is.True(s.RollupsComplete()) // the upkeep finished the backfill
	b, err = readBackfill(ctx, s.r)
	is.NoErr(err)
	is.Equal(b.after, b.through) // complete
	storetest.CheckRollups(t, s)
	storetest.CheckLedger(t, s)
	storetest.CheckAllUsage(t, s, r, accounts, 0)

	// Another process opening it now reads the roll-ups alone.
	is.NoErr(s.Close())
	s = openTestStore(t, legacy, store.Options{Now: clock.Now})
	is.True(s.RollupsComplete())
}

func TestBackfill_NewDatabaseIsComplete(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	is.True(s.RollupsComplete()) // nothing to backfill on a database born with roll-ups
	b, err := readBackfill(context.Background(), s.r)
	is.NoErr(err)
	is.Equal(b, backfill{}) // 0, 0
}

// TestBackfill_TwoProcessesCountOnce runs the backfill of one database from
// two stores at once (as two processes could), in small chunks: whichever
// commits a chunk first wins it, the other notices and goes on from there,
// and every generation is rolled up exactly once.
func TestBackfill_TwoProcessesCountOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	src, clock := newTestStore(t)
	storetest.RandomWorkload(t, src, clock, r, 1000)
	is.NoErr(src.Close())
	legacy := filepath.Join(t.TempDir(), "legacy.db")
	legacyCopy(t, src.path, legacy)

	stores := []*Store{openTestStore(t, legacy, store.Options{Now: clock.Now}), openTestStore(t, legacy, store.Options{Now: clock.Now})}
	var wg sync.WaitGroup
	rolled := make([]int, len(stores))
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs store.RollupSums
			for {
				// At most 300 rowids, and fewer once 50 daily rows are
				// summed: many small chunks, so the two race often.
				ch, err := s.backfillChunk(ctx, 300, 50, &rs, nil)
				if err != nil {
					t.Error(err)
					return
				}
				rolled[i] += ch.rolled
				if ch.left == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	b, err := readBackfill(ctx, stores[0].r)
	is.NoErr(err)
	is.True(b.complete())
	is.Equal(rolled[0]+rolled[1], 1000) // each generation rolled up by one of them
	storetest.CheckRollups(t, stores[0])
}

// TestMigration0007_UsagePeriodsChecks upgrades a ledger whose usage_periods
// has the checks of migration 0003 (axis IN (…), span IN (…)): opening it
// rebuilds the table with the comparison checks of 0007, keeping every row,
// and the rebuilt table refuses what the old one refused.
func TestMigration0007_UsagePeriodsChecks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{Now: clock.Now})
	r := rand.New(rand.NewPCG(7, 7))
	accounts := storetest.RandomWorkload(t, s, clock, r, 400)

	// The table as 0003 made it, holding the same rows, and 0007 not yet
	// applied: the database of a svcgw from before 0007.
	const rows = `SELECT account_id, axis, span, first_day, bucket, requests, input_tokens, output_tokens,
		cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_micros FROM usage_periods`
	for _, q := range []string{
		tableOf(t, 3, "usage_periods", "usage_periods_0003"),
		`INSERT INTO usage_periods_0003 ` + rows,
		`DROP TABLE usage_periods`,
		`ALTER TABLE usage_periods_0003 RENAME TO usage_periods`,
		`DELETE FROM schema_migrations WHERE version = 7`,
	} {
		storetest.Exec(t, s, q)
	}
	before := storetest.QueryInt(t, s, `SELECT COUNT(*) FROM usage_periods`)
	is.True(before > 100) // rows of every axis and span to carry over
	var old string
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'usage_periods'`).Scan(&old))
	is.True(strings.Contains(old, "axis IN (")) // the checks as 0003 wrote them
	is.NoErr(s.Close())

	s = openTestStore(t, path, store.Options{Now: clock.Now})
	is.Equal(storetest.QueryInt(t, s, `SELECT COUNT(*) FROM schema_migrations WHERE version = 7`), int64(1)) // 0007 applied
	var ddl string
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'usage_periods'`).Scan(&ddl))
	is.True(!strings.Contains(ddl, " IN ("))                                          // the comparison checks
	is.True(strings.Contains(ddl, "span = 'day' OR span = 'month' OR span = 'year'")) // of 0007
	is.Equal(storetest.QueryInt(t, s, `SELECT COUNT(*) FROM usage_periods`), before)  // every row kept
	storetest.CheckRollups(t, s)                                                      // with the same sums
	storetest.CheckAllUsage(t, s, r, accounts, 3)

	// The new checks refuse what the old ones did.
	a := accounts[0].ID
	for _, bad := range [][2]string{{"week", "day"}, {"", "day"}, {"DAY", "day"}, {"api_key", "week"}, {"api_key", ""}, {"day", "Month"}} {
		_, err := s.w.ExecContext(ctx, `INSERT INTO usage_periods VALUES (?, ?, ?, 1, '', 1, 0, 0, 0, 0, 0, 0)`, a, bad[0], bad[1])
		is.True(err != nil && strings.Contains(err.Error(), "CHECK constraint failed")) // a bad axis or span
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO usage_periods VALUES (?, 'api_key', 'year', 1, '', 1, 0, 0, 0, 0, 0, -1)`, a)
	is.True(err != nil && strings.Contains(err.Error(), "CHECK constraint failed")) // a negative cost

	// The ledger goes on adding to the rebuilt table.
	var k store.Key
	is.NoErr(s.r.QueryRowContext(ctx, `SELECT id, account_id FROM api_keys LIMIT 1`).Scan(&k.ID, &k.AccountID))
	for i := range 50 {
		g := storetest.Gen(t, fmt.Sprint("after-", i), k, "0.001")
		g.RequestType = []string{"flash", "pro", "code"}[i%3]
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	storetest.CheckRollups(t, s)
	storetest.CheckLedger(t, s)
}

// tableOf is the CREATE TABLE statement of table in the shipped migration
// of version, naming the table as: the table as that migration made it.
func tableOf(t *testing.T, version int, table, as string) string {
	t.Helper()
	ms, err := sqliteMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version != version {
			continue
		}
		head := "CREATE TABLE " + table + " ("
		i := strings.Index(m.SQL, head)
		if i < 0 {
			break
		}
		create, _, _ := strings.Cut(m.SQL[i:], ";")
		return "CREATE TABLE " + as + " (" + create[len(head):]
	}
	t.Fatalf("migration %d creates no table %s", version, table)
	return ""
}
