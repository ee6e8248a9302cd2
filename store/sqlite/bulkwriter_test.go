package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// writerPragma reads a pragma's value on the writer connection.
func writerPragma(t *testing.T, s *Store, name string) int {
	t.Helper()
	var v int
	if err := s.w.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// A store with ordinary batches (serving) has a writer page cache of
// servingCacheKiB; its readers keep SQLite's default.
func TestWriter_DefaultCache(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	is.Equal(writerPragma(t, s, "cache_size"), -servingCacheKiB)
	var readers int
	is.NoErr(s.r.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&readers))
	is.Equal(readers, -2000)
}

// A bulk writer (BatchSize 8,192 or more) gets a page cache for its
// batches and checkpoints less often; large batches, whose rows go in
// INSERTs of bulkInsertChunk rows and whose sums are made while their rows
// are inserted, add up exactly.
func TestBulkWriter(t *testing.T) {
	is := is.New(t)
	// The concurrent sums need a second P, and batches of 512 rows make
	// them here (4,096 outside the tests: too slow under the race
	// detector).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer func(n int) { concurrentSumRows = n }(concurrentSumRows)
	concurrentSumRows = 512
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	var commits atomic.Int64
	s := openTestStore(t, path, store.Options{Now: clock.Now, BatchSize: store.BulkBatchRows, QueueSize: 4 * store.BulkBatchRows, BatchInterval: time.Hour,
		OnCommit:      func(store.LedgerCommit) { commits.Add(1) },
		CommitTimeout: 2 * time.Minute}) // the race detector on a busy machine
	is.Equal(writerPragma(t, s, "cache_size"), -store.BulkBatchRows*writerCacheBytesPerRow/1024)
	is.Equal(writerPragma(t, s, "wal_autocheckpoint"), bulkCheckpointPages)

	ctx := context.Background()
	var keys []store.Key
	for _, name := range []string{"acme", "globex"} {
		a, k, _ := storetest.NewAccount(t, s, name, "100000")
		keys = append(keys, k)
		_, k2, err := s.CreateKey(ctx, a.ID, "second")
		is.NoErr(err)
		keys = append(keys, k2)
	}
	r := rand.New(rand.NewPCG(3, 4))
	apps := []string{"alpha", "beta", ""}
	types := []string{"flash", "pro", "code", "long"}
	start := time.Date(2025, 1, 30, 0, 0, 0, 0, time.UTC)
	// A batch of 2,600 (two INSERTs of 1,024 rows and the rest in the
	// smaller chunks), then one of 400.
	const n = 3000
	for i := range n {
		k := keys[r.IntN(len(keys))]
		g := store.Generation{
			ID: fmt.Sprintf("gen-%06d", i), AccountID: k.AccountID, KeyID: k.ID,
			Application: apps[r.IntN(len(apps))], RequestType: types[r.IntN(len(types))],
			Surface: "chat", Model: "svc-fusion", PromptTokens: r.IntN(5000), CompletionTokens: r.IntN(2000),
			Cost: money.Micros(r.IntN(50000)),
		}
		g.CachedPromptTokens = r.IntN(g.PromptTokens + 1)
		g.ReasoningTokens = r.IntN(g.CompletionTokens + 1)
		if r.IntN(50) == 0 {
			g.KeyID = ""
		}
		clock.Set(start.Add(time.Duration(i) * 7 * time.Hour)) // months and a year's end
		s.RecordGeneration(g)
		if i == 2599 {
			is.NoErr(s.Sync(ctx))
			is.Equal(s.bulkInserts, 2)             // the batch used the bulk INSERT, on the driver connection
			is.True(s.stmts[bulkInsertSQL] == nil) // and not through database/sql
		}
	}
	is.NoErr(s.Sync(ctx))
	is.Equal(s.LedgerStats().Committed, uint64(n))
	is.True(commits.Load() >= 2) // committed in batches of 512 or more
	storetest.CheckRollups(t, s)
	storetest.CheckLedger(t, s)

	is.NoErr(s.Close())
	_, err := os.Stat(path + "-wal")
	is.True(os.IsNotExist(err)) // checkpointed and removed at Close
}

// A bulk writer in a checkpoint mode that takes the checkpoint out of the
// commit keeps SQLite's automatic checkpoint off.
func TestBulkWriter_CheckpointModes(t *testing.T) {
	is := is.New(t)
	for mode, want := range map[string]int{
		CheckpointInCommit:    bulkCheckpointPages,
		CheckpointAfterCommit: 0,
		CheckpointAside:       0,
	} {
		s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{BatchSize: store.BulkBatchRows, Checkpoint: mode})
		is.Equal(writerPragma(t, s, "wal_autocheckpoint"), want) // mode
		is.NoErr(s.Close())
	}
	// A serving store keeps SQLite's own.
	s, _ := newTestStore(t)
	is.Equal(writerPragma(t, s, "wal_autocheckpoint"), 1000)
}

// openBulkStore opens a bulk writer on a new database, on clock, that
// commits only full batches.
func openBulkStore(t *testing.T, clock *storetest.Clock) *Store {
	return openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{Now: clock.Now,
		BatchSize: store.BulkBatchRows, BatchInterval: time.Hour, CommitTimeout: 2 * time.Minute})
}

// A bad row in a bulk writer's 1,024-row INSERT (which runs on the driver
// connection) fails the batch as through database/sql: the batch is then
// committed row by row, and only the bad rows are dropped; the spend they
// were counted in is taken back.
func TestBulkWriter_DropsBadRowsOnly(t *testing.T) {
	is := is.New(t)
	clock := storetest.NewClock()
	s := openBulkStore(t, clock)
	ctx := context.Background()
	a, k, _ := storetest.NewAccount(t, s, "acme", "100000")
	s.RecordGeneration(storetest.Gen(t, "gen-dup", k, "0.01"))
	is.NoErr(s.Sync(ctx))

	const n = 1100 // one 1,024-row INSERT and the rest
	for i := range n {
		g := storetest.Gen(t, fmt.Sprintf("gen-%04d", i), k, "0.001")
		switch i {
		case 100:
			g.ID = "gen-dup" // already stored
		case 700:
			g.KeyID = "no-such-key"
		}
		clock.Set(time.Date(2025, 3, 1, 0, 0, i, 0, time.UTC))
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	is.True(s.bulkInserts >= 1) // the 1,024 rows went to the driver connection, and failed there
	st := s.LedgerStats()
	is.Equal(st.Committed, uint64(1+n-2))
	is.Equal(st.Dropped, uint64(2))
	is.Equal(storetest.QueryInt(t, s, `SELECT COUNT(*) FROM generations`), int64(1+n-2))
	spend, err := s.Spend(ctx, a.ID, "", clock.Now())
	is.NoErr(err)
	is.Equal(spend.Total, int64(10_000+(n-2)*1_000)) // micro-dollars: the dropped charges taken back
	storetest.CheckRollups(t, s)
	storetest.CheckLedger(t, s)
}

// A bulk batch runs without SQLite's foreign-key checks, so the writer
// checks the batch's accounts and keys itself: rows naming an account or a
// key that does not exist, inside the 1,024-row INSERT and in the batch's
// rest, fail the batch as a foreign key does; it is committed row by row,
// only those rows are dropped, and their charges are taken back.
func TestBulkWriter_MissingParents(t *testing.T) {
	is := is.New(t)
	clock := storetest.NewClock()
	s := openBulkStore(t, clock)
	ctx := context.Background()
	a, k, _ := storetest.NewAccount(t, s, "acme", "100000")
	b, kb, _ := storetest.NewAccount(t, s, "globex", "100000")
	checked := 0
	defer func() { bulkBatchHook = nil }()
	bulkBatchHook = func(context.Context, *sql.Tx) { checked++ }

	const n = 1100 // one 1,024-row INSERT and the rest
	for i := range n {
		key := k
		if i%2 == 1 {
			key = kb
		}
		g := storetest.Gen(t, fmt.Sprintf("gen-%04d", i), key, "0.001")
		switch i {
		case 200:
			g.AccountID = b.ID + 100 // no such account; its key exists
		case 700:
			g.KeyID = "key_nosuchkey" // in the 1,024-row INSERT
		case 1050:
			g.KeyID = "key_nosuchkey2" // in the rest
		case 1051:
			g.KeyID = "" // no key: nothing to check
		}
		clock.Set(time.Date(2025, 3, 1, 0, 0, i, 0, time.UTC))
		s.RecordGeneration(g)
	}
	is.NoErr(s.Sync(ctx))
	is.True(s.bulkInserts >= 1) // the batch went in as a bulk batch
	st := s.LedgerStats()
	is.Equal(st.Committed, uint64(n-3))
	is.Equal(st.Dropped, uint64(3))
	is.Equal(checked, 0) // the bulk batch failed at checkParents, before the hook
	is.Equal(storetest.QueryInt(t, s, `SELECT COUNT(*) FROM generations`), int64(n-3))
	is.Equal(storetest.QueryInt(t, s, `SELECT COUNT(*) FROM generations WHERE id IN ('gen-0200', 'gen-0700', 'gen-1050')`), int64(0))
	for _, acct := range []store.Account{a, b} {
		spend, err := s.Spend(ctx, acct.ID, "", clock.Now())
		is.NoErr(err)
		is.Equal(spend.Total, 1_000*storetest.QueryInt(t, s, `SELECT COUNT(*) FROM generations WHERE account_id = ?`, acct.ID)) // the dropped charges taken back
	}
	storetest.CheckRollups(t, s)
	storetest.CheckLedger(t, s)

	// A batch whose parents all exist passes the check and commits whole.
	for i := range n {
		s.RecordGeneration(storetest.Gen(t, fmt.Sprintf("gen-b-%04d", i), k, "0.001"))
	}
	is.NoErr(s.Sync(ctx))
	is.Equal(checked, 1)
	is.Equal(s.LedgerStats().Committed, uint64(2*n-3))
	storetest.CheckLedger(t, s)
}

// vdbeOp is one instruction of a statement's program (EXPLAIN).
type vdbeOp struct {
	opcode string
	p1, p2 int64
}

// mayAbort reports what in the program of query, compiled on q's
// connection, makes SQLite run it with a statement journal inside a
// transaction: the instructions its sqlite3VdbeAssertMayAbort counts for
// an INSERT (a constraint's halt with ABORT, an immediate foreign key's
// counter). Empty: none. It may run on the ledger writer's goroutine, so
// it reports a failure with t.Errorf.
func mayAbort(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string) []vdbeOp {
	t.Helper()
	params := make([]any, strings.Count(query, "?")) // NULLs: EXPLAIN compiles, never runs
	rows, err := q.QueryContext(context.Background(), "EXPLAIN "+query, params...)
	if err != nil {
		t.Errorf("EXPLAIN: %v", err)
		return nil
	}
	defer rows.Close()
	var found []vdbeOp
	for rows.Next() {
		var (
			addr, p3, p5 int64
			op           vdbeOp
			p4, comment  any
		)
		if err := rows.Scan(&addr, &op.opcode, &op.p1, &op.p2, &p3, &p4, &p5, &comment); err != nil {
			t.Errorf("EXPLAIN: %v", err)
			return nil
		}
		const oeAbort = 2
		switch {
		case (op.opcode == "Halt" || op.opcode == "HaltIfNull") && op.p1 != 0 && op.p2 == oeAbort,
			op.opcode == "FkCounter" && op.p1 == 0:
			found = append(found, op)
		}
	}
	if err := rows.Err(); err != nil {
		t.Errorf("EXPLAIN: %v", err)
	}
	return found
}

// A bulk batch runs with foreign keys off on the writer connection and its
// 1,024-row INSERTs as INSERT OR ROLLBACK: the program SQLite compiles for
// them then has nothing that may abort, so it runs without a statement
// journal. (SQLite counts no statement-journal pages; what decides the
// journal is fixed when a statement is compiled — it is used when the
// program may abort and writes more than one row — and EXPLAIN shows the
// instructions that make it "may abort".) Outside its batches the bulk
// writer's connection has foreign keys on again, and a serving store's
// writer and every reader always have.
func TestBulkWriter_NoStatementJournal(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pragma := func(db *sql.DB) int {
		var v int
		is.NoErr(db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&v)) // read foreign_keys
		return v
	}
	serving, _ := newTestStore(t)
	for _, db := range []*sql.DB{serving.w, serving.r, serving.call} {
		is.Equal(pragma(db), 1) // a serving store's connections check foreign keys
	}
	// What the test counts is there in an ordinary INSERT: the foreign
	// keys' counters and the constraints' ABORT.
	is.True(len(mayAbort(t, serving.w, insertSQLOf(2))) > 0)

	s := openTestStore(t, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{BatchSize: store.BulkBatchRows,
		BatchInterval: time.Hour, CommitTimeout: 2 * time.Minute})
	for _, db := range []*sql.DB{s.w, s.r, s.call} {
		is.Equal(pragma(db), 1) // a bulk writer's too, outside its batches
	}
	var (
		batches     int
		fk          = -1
		bulk, plain []vdbeOp
	)
	defer func() { bulkBatchHook = nil }()
	bulkBatchHook = func(ctx context.Context, tx *sql.Tx) { // on the writer's goroutine: no is here
		batches++
		if err := tx.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Errorf("PRAGMA foreign_keys: %v", err)
		}
		bulk = mayAbort(t, tx, bulkInsertSQL)
		plain = mayAbort(t, tx, insertSQLOf(bulkInsertChunk))
	}
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000")
	for i := range 1100 {
		s.RecordGeneration(storetest.Gen(t, fmt.Sprintf("gen-%04d", i), k, "0.001"))
	}
	is.NoErr(s.Sync(ctx))
	is.Equal(batches, 1)
	is.Equal(fk, 0)          // no foreign keys in the batch
	is.Equal(bulk, nil)      // its bulk INSERT may not abort: no statement journal
	is.True(len(plain) > 0)  // without OR ROLLBACK, the constraints' ABORT would make one
	is.Equal(pragma(s.w), 1) // foreign keys on again after the batch
	is.Equal(s.LedgerStats().Committed, uint64(1100))
	storetest.CheckLedger(t, s)
}

// A bulk writer's connection runs with synchronous=OFF, a serving store's
// with NORMAL. While the load runs its marker is beside the database; Close
// puts synchronous back, checkpoints everything, fsyncs the database file
// while the marker still exists, and only then removes the marker.
func TestBulkWriter_SynchronousOff(t *testing.T) {
	is := is.New(t)
	serving, _ := newTestStore(t)
	is.Equal(writerPragma(t, serving, "synchronous"), 1) // NORMAL
	_, err := os.Stat(serving.Path() + bulkLoadSuffix)
	is.True(os.IsNotExist(err)) // no marker for a serving store

	type synced struct {
		path   string
		marker bool // the marker existed when path was synced
	}
	var syncs []synced
	path := filepath.Join(t.TempDir(), "svcgw.db")
	marker := path + bulkLoadSuffix
	defer func(f func(string) error) { bulkSync = f }(bulkSync)
	bulkSync = func(p string) error {
		_, err := os.Stat(marker)
		syncs = append(syncs, synced{p, err == nil})
		return syncFile(p)
	}
	clock := storetest.NewClock()
	s := openTestStore(t, path, store.Options{Now: clock.Now, BatchSize: store.BulkBatchRows, BatchInterval: time.Hour,
		CommitTimeout: 2 * time.Minute})
	is.Equal(writerPragma(t, s, "synchronous"), 0) // OFF
	b, err := os.ReadFile(marker)
	is.NoErr(err)
	is.True(strings.HasPrefix(string(b), "bulk load by pid ")) // the marker says who
	// Written and synced, with its directory entry, before the first
	// unsynced write.
	is.Equal(syncs, []synced{{marker, true}, {filepath.Dir(path), true}})

	ctx := context.Background()
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000")
	const n = 1500 // one 1,024-row INSERT and the rest
	for i := range n {
		s.RecordGeneration(storetest.Gen(t, fmt.Sprintf("gen-%04d", i), k, "0.001"))
	}
	is.NoErr(s.Sync(ctx))
	syncs = nil
	is.NoErr(s.Close())
	is.Equal(syncs, []synced{{path, true}, {filepath.Dir(path), false}}) // the file, then the marker's removal
	_, err = os.Stat(marker)
	is.True(os.IsNotExist(err))
	_, err = os.Stat(path + "-wal")
	is.True(os.IsNotExist(err)) // all of it in the database file

	// The database opens as any other, with every generation.
	s2 := openTestStore(t, path, store.Options{Now: clock.Now})
	is.Equal(writerPragma(t, s2, "synchronous"), 1)
	var rows int
	is.NoErr(s2.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM generations").Scan(&rows))
	is.Equal(rows, n)
	var check string
	is.NoErr(s2.r.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check))
	is.Equal(check, "ok")
}

// A bulk load that has not finished (its store not closed: the process
// killed, the machine down) or whose Close failed keeps its marker, and
// every Open refuses the database, saying why, until the marker is removed.
func TestBulkWriter_Unfinished(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{BatchSize: store.BulkBatchRows, BatchInterval: time.Hour})
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000")
	s.RecordGeneration(storetest.Gen(t, "gen-1", k, "0.001"))
	is.NoErr(s.Sync(ctx))

	for _, opts := range []store.Options{{}, {BatchSize: store.BulkBatchRows}, {Existing: true}} {
		_, err := Open(ctx, path, opts)
		is.True(errors.Is(err, ErrUnfinishedBulkLoad))              // serving, another bulk load, the CLI
		is.True(strings.Contains(err.Error(), path+bulkLoadSuffix)) // names the marker
		is.True(strings.Contains(err.Error(), "Load it again"))     // and what to do
	}
	is.NoErr(s.Close())
	s = openTestStore(t, path, store.Options{})
	is.NoErr(s.Close())

	// A load whose last commits cannot be made: Close reports them, and
	// the marker stays.
	path = filepath.Join(t.TempDir(), "svcgw.db")
	failing := atomic.Bool{}
	s = openTestStore(t, path, store.Options{BatchSize: store.BulkBatchRows, BatchInterval: time.Hour,
		CloseTimeout: 200 * time.Millisecond, RetryInterval: 50 * time.Millisecond,
		CommitHook: func() error {
			if failing.Load() {
				return errors.New("disk full")
			}
			return nil
		}})
	_, k, _ = storetest.NewAccount(t, s, "acme", "1000")
	failing.Store(true)
	s.RecordGeneration(storetest.Gen(t, "gen-1", k, "0.001"))
	is.True(s.Close() != nil)
	_, err := Open(ctx, path, store.Options{})
	is.True(errors.Is(err, ErrUnfinishedBulkLoad))

	// Once an operator removes the marker (an incomplete load will do),
	// it opens.
	is.NoErr(os.Remove(path + bulkLoadSuffix))
	s = openTestStore(t, path, store.Options{})
	is.NoErr(s.Close())
}

// A bulk load whose process is killed (SIGKILL) in the middle of it leaves
// a database that is consistent, as SQLite promises under synchronous=OFF
// when only the process dies, and that every Open refuses until the marker
// is removed. The load runs in a child process: this test's binary, run
// again with bulkChildEnv set.
func TestBulkWriter_Killed(t *testing.T) {
	if path := os.Getenv(bulkChildEnv); path != "" {
		bulkLoadForever(t, path)
		return
	}
	if runtime.GOOS == "windows" || testing.Short() {
		t.Skip("needs SIGKILL and a child process")
	}
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "svcgw.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestBulkWriter_Killed$")
	cmd.Env = append(os.Environ(), bulkChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	// Killed once it has committed three batches, while it makes or
	// commits the next.
	sc := bufio.NewScanner(out)
	for commits := 0; commits < 3 && sc.Scan(); {
		if sc.Text() == "committed" {
			commits++
		}
	}
	is.NoErr(cmd.Process.Kill())
	_ = cmd.Wait()

	_, err = Open(context.Background(), path, store.Options{})
	is.True(errors.Is(err, ErrUnfinishedBulkLoad)) // reported, not opened
	is.NoErr(os.Remove(path + bulkLoadSuffix))
	s := openTestStore(t, path, store.Options{})
	var check string
	is.NoErr(s.r.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check))
	is.Equal(check, "ok")
	var rows int
	is.NoErr(s.r.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM generations").Scan(&rows))
	is.True(rows >= 3*1100) // at least what the child had committed
	storetest.CheckLedger(t, s)
}

// bulkChildEnv names the database TestBulkWriter_Killed's child loads.
const bulkChildEnv = "SVCGW_TEST_BULK_CHILD"

// bulkLoadForever records batches into a bulk writer at path, printing
// "committed" after each, until the process is killed.
func bulkLoadForever(t *testing.T, path string) {
	s, err := Open(context.Background(), path, store.Options{BatchSize: store.BulkBatchRows, BatchInterval: time.Hour,
		CommitTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000000")
	for i := 0; ; i++ {
		for j := range 1100 { // a 1,024-row INSERT and the rest
			s.RecordGeneration(storetest.Gen(t, fmt.Sprintf("gen-%d-%04d", i, j), k, "0.001"))
		}
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		fmt.Println("committed")
	}
}
