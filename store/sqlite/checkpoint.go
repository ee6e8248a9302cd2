package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"time"
)

// Where the write-ahead log is copied back into the database file (a
// checkpoint). This file is the one place that decides it; Options.Checkpoint
// chooses, `svcgw serve --wal-checkpoint` sets it.
//
// SQLite's own automatic checkpoint runs inside the COMMIT that takes the WAL
// past 1,000 pages (wal_autocheckpoint). At 2,000 calls/s that is about one
// ledger commit a second, and that commit takes ~1.5–2 ms of CPU instead of
// ~0.4 ms, plus the two fsyncs a checkpoint makes under synchronous=NORMAL
// (3–10 ms of wall time on this machine): modernc's SQLite is Go code, so
// with one P (a process pinned to one core) every call waits for all of it.
const (
	// CheckpointInCommit leaves it to SQLite (the default): the COMMIT
	// that crosses 1,000 WAL pages checkpoints.
	CheckpointInCommit = "commit"
	// CheckpointAfterCommit turns the writer's automatic checkpoint off;
	// the ledger writer checkpoints (PASSIVE, as SQLite's own) after a
	// commit that left the WAL at checkpointPages or more, once the commit's
	// waiters are settled and after yielding to the goroutines waiting to
	// run.
	CheckpointAfterCommit = "ledger"
	// CheckpointAside is CheckpointAfterCommit, and while the checkpoint
	// runs in a process with one P, the runtime gets a second one
	// (GOMAXPROCS 2 for the checkpoint's length): the calls go on running
	// on their own thread, which the kernel shares the core with, instead
	// of waiting for the checkpoint's CPU and its fsyncs. Setting
	// GOMAXPROCS turns off the runtime's own updates of it (to the CPUs the
	// process may use): a process moved to more cores keeps one P.
	CheckpointAside = "aside"
)

// checkpointPages is the WAL size, in pages, past which the ledger writer
// checkpoints in the modes that take the checkpoint out of the commit:
// SQLite's own default threshold.
const checkpointPages = 1000

// checkpointer is the ledger writer's checkpoint, for the modes that take it
// out of the commit (nil for CheckpointInCommit).
type checkpointer struct {
	aside bool
	shm   *os.File // the WAL index, whose header holds the WAL's length
	hdr   [4]byte
}

// checkpointDSN is what the writer's DSN adds for mode.
func checkpointDSN(mode string) (string, error) {
	switch mode {
	case "", CheckpointInCommit:
		return "", nil
	case CheckpointAfterCommit, CheckpointAside:
		return "&_pragma=wal_autocheckpoint(0)", nil
	}
	return "", fmt.Errorf("checkpoint mode %q: want %q, %q or %q", mode, CheckpointInCommit, CheckpointAfterCommit, CheckpointAside)
}

// openCheckpointer opens the WAL index of the database at path for mode
// (after the writer has put it in WAL mode, which creates the index).
func openCheckpointer(path, mode string) (*checkpointer, error) {
	if mode == "" || mode == CheckpointInCommit {
		return nil, nil
	}
	f, err := os.Open(path + "-shm")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &checkpointer{aside: mode == CheckpointAside, shm: f}, nil
}

func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	return c.shm.Close()
}

// walPages reads mxFrame, the number of valid frames in the WAL, from the
// WAL index header (bytes 16–19, native byte order: sqlite.org/walformat.html).
// It is exact after our own commit: only the writer appends frames.
func (c *checkpointer) walPages() (int, error) {
	if _, err := c.shm.ReadAt(c.hdr[:], 16); err != nil {
		return 0, err
	}
	return int(binary.NativeEndian.Uint32(c.hdr[:])), nil
}

// maybeCheckpoint runs after a ledger commit: a PASSIVE checkpoint when the
// WAL has grown past checkpointPages.
func (s *Store) maybeCheckpoint() {
	c := s.ckpt
	if c == nil {
		return
	}
	n, err := c.walPages()
	if err != nil {
		// Hand the checkpoints back to SQLite rather than let the WAL grow.
		s.Logger().Warn("ledger: cannot read the WAL's length; SQLite checkpoints in the commit from now on", "err", err)
		if _, err := s.w.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint=%d", checkpointPages)); err != nil {
			s.Logger().Warn("ledger: turning SQLite's automatic checkpoint back on failed", "err", err)
		}
		c.close()
		s.ckpt = nil
		return
	}
	if n < checkpointPages {
		return
	}
	yieldCPU()
	if c.aside && runtime.GOMAXPROCS(0) == 1 {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.CommitTimeout())
	defer cancel()
	start := time.Now()
	if _, err := s.w.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		s.Logger().Warn("ledger: WAL checkpoint failed", "err", err, "wal_pages", n,
			"took", time.Since(start).Round(time.Microsecond).String())
	}
}
