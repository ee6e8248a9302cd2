package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// TestCheckpointModes commits 300 batches of 40 generations (~6,000 WAL
// pages without a checkpoint) in each mode: the WAL stays near 1,000 pages
// (SQLite's own, or the ledger's PASSIVE checkpoint once it passes them),
// every generation is stored, and CheckpointAside leaves GOMAXPROCS as it
// found it.
func TestCheckpointModes(t *testing.T) {
	for _, mode := range []string{"", CheckpointInCommit, CheckpointAfterCommit, CheckpointAside} {
		t.Run("mode="+mode, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			path := filepath.Join(t.TempDir(), "svcgw.db")
			s := openTestStore(t, path, store.Options{BatchInterval: time.Hour, Checkpoint: mode})
			_, k, _ := storetest.NewAccount(t, s, "acme", "1000000")
			g := storetest.Gen(t, "", k, "0.000123")
			most := 0
			for round := range 300 {
				commitRound(t, s, g, round)
				if p := settledProcs(); p != 1 {
					t.Fatalf("GOMAXPROCS %d after a commit, want 1", p)
				}
				c, err := openCheckpointer(path, CheckpointAfterCommit)
				if err != nil {
					t.Fatal(err)
				}
				pages, err := c.walPages()
				c.close()
				if err != nil {
					t.Fatal(err)
				}
				most = max(most, pages)
			}
			// A commit appends ~20 pages; the checkpoint lets the next
			// commit start the WAL over.
			if most < checkpointPages || most > checkpointPages+200 {
				t.Errorf("WAL peaked at %d pages, want about %d", most, checkpointPages)
			}
			st, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() > 8<<20 {
				t.Errorf("WAL file %d bytes: not checkpointed", st.Size())
			}
			var stored int
			if err := s.w.QueryRowContext(context.Background(), "SELECT count(*) FROM generations").Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != 300*40 {
				t.Errorf("%d generations stored, want %d", stored, 300*40)
			}
		})
	}
}

func TestCheckpointModeUnknown(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{Checkpoint: "sometimes"})
	if err == nil || errors.Is(err, store.ErrNoDatabase) {
		t.Fatalf("Open with an unknown checkpoint mode: %v, want an error naming the modes", err)
	}
}

// TestCheckpointWALIndexUnreadable: when the WAL index cannot be read, the
// ledger hands the checkpoints back to SQLite (the WAL stays bounded) and
// says so once.
func TestCheckpointWALIndexUnreadable(t *testing.T) {
	var logged strings.Builder
	path := filepath.Join(t.TempDir(), "svcgw.db")
	s := openTestStore(t, path, store.Options{BatchInterval: time.Hour, Checkpoint: CheckpointAfterCommit,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	_, k, _ := storetest.NewAccount(t, s, "acme", "1000000")
	g := storetest.Gen(t, "", k, "0.000123")
	s.ckpt.shm.Close() // reads now fail
	for round := range 300 {
		commitRound(t, s, g, round)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<20 {
		t.Errorf("WAL file %d bytes: not checkpointed", st.Size())
	}
	if err := s.Close(); err != nil { // the writer is done: its fields and log can be read
		t.Fatal(err)
	}
	if s.ckpt != nil {
		t.Error("the checkpointer is still on")
	}
	if c := strings.Count(logged.String(), "cannot read the WAL's length"); c != 1 {
		t.Errorf("logged %d times, want once:\n%s", c, logged.String())
	}
}

// commitRound records 40 copies of g with ids of their own (round's) and
// commits them: one ledger commit of ~20 WAL pages.
func commitRound(t *testing.T, s *Store, g store.Generation, round int) {
	t.Helper()
	for i := range 40 {
		g.ID = "chatcmpl-" + strconv.Itoa(round*40+i)
		s.RecordGeneration(g)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// settledProcs is GOMAXPROCS once a checkpoint the ledger may still be
// running is over: the ledger checkpoints after Sync has answered, and in
// CheckpointAside the checkpoint holds a second P until it ends (which,
// on a busy machine, can be after the test's next look).
func settledProcs() int {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p := runtime.GOMAXPROCS(0); p == 1 {
			return p
		}
	}
	return runtime.GOMAXPROCS(0)
}
