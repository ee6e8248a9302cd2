package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svcgw/svcgw/store"
)

// BackupResult describes a copy Backup made.
type BackupResult struct {
	// Bytes is the size of the copy. VACUUM INTO writes it compacted, so
	// it is usually smaller than the database and its WAL.
	Bytes int64
	// Took is how long the copy (and its check) took.
	Took time.Duration
	// Checked is set when the copy passed PRAGMA integrity_check.
	Checked bool
}

// Backup writes a consistent copy of the database at path to dest while
// other processes (a serving svcgw) go on reading and writing it. It uses
// SQLite's VACUUM INTO in one read transaction: the copy is the database as
// of the moment that transaction began, every ledger commit before it
// included and every one after it excluded, and the writer is never
// blocked (in WAL mode readers and the writer do not wait for each other;
// checkpoints only stop short of the pages the copy still reads).
//
// The copy is written to a temporary file beside dest, checked with PRAGMA
// integrity_check unless skipCheck, synced, and only then given its name,
// without ever replacing a file: dest must not exist (ErrInvalid if it
// does), and a failed backup leaves nothing under dest. The database at
// path must exist: Backup never creates one. A copy keeps every rowid, so
// even one made while the roll-up backfill runs resumes it correctly.
//
// The copy is an ordinary SQLite file (rollback journal mode); svcgw puts
// it in WAL mode when it opens it. Restore by stopping svcgw and putting
// the copy in place of the database (deleting any -wal and -shm files of
// the old one).
func Backup(ctx context.Context, path, dest string, skipCheck bool) (BackupResult, error) {
	started := time.Now()
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") {
		return BackupResult{}, fmt.Errorf("backup %q: %w: want a plain file path", path, store.ErrInvalid)
	}
	if st, err := os.Stat(path); err != nil {
		return BackupResult{}, fmt.Errorf("backup: %w", err)
	} else if !st.Mode().IsRegular() {
		return BackupResult{}, fmt.Errorf("backup: %s: %w: not a database file", path, store.ErrInvalid)
	}
	if _, err := os.Lstat(dest); err == nil {
		return BackupResult{}, fmt.Errorf("backup: %s: %w: it already exists (a backup never replaces a file)", dest, store.ErrInvalid)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return BackupResult{}, fmt.Errorf("backup: %w", err)
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return BackupResult{}, fmt.Errorf("backup: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".partial-"+hex.EncodeToString(suffix[:]))
	defer os.Remove(tmp) // gone once linked as dest, or on failure

	// A plain connection: query_only would refuse VACUUM INTO, which
	// writes only its output file. No migration, no ledger, no pragma that
	// writes: the source is opened as it is.
	db, err := sql.Open("sqlite", path+"?"+dsnPragmas)
	if err != nil {
		return BackupResult{}, fmt.Errorf("backup: open: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return BackupResult{}, fmt.Errorf("backup: copy: %w", err)
	}
	if err := db.Close(); err != nil {
		return BackupResult{}, fmt.Errorf("backup: close: %w", err)
	}

	res := BackupResult{}
	if !skipCheck {
		if err := checkIntegrity(ctx, tmp); err != nil {
			return BackupResult{}, fmt.Errorf("backup: the copy failed its check: %w", err)
		}
		res.Checked = true
	}
	if err := syncFile(tmp); err != nil {
		return BackupResult{}, fmt.Errorf("backup: %w", err)
	}
	// A hard link gives the copy its name atomically and fails if dest has
	// appeared meanwhile, where a rename would replace it.
	if err := os.Link(tmp, dest); errors.Is(err, fs.ErrExist) {
		return BackupResult{}, fmt.Errorf("backup: %s: %w: it appeared during the backup (a backup never replaces a file)", dest, store.ErrInvalid)
	} else if err != nil {
		// A file system without hard links: rename, having looked once
		// more that dest does not exist.
		if _, lerr := os.Lstat(dest); !errors.Is(lerr, fs.ErrNotExist) {
			return BackupResult{}, fmt.Errorf("backup: %w", err)
		}
		if err := os.Rename(tmp, dest); err != nil {
			return BackupResult{}, fmt.Errorf("backup: %w", err)
		}
	}
	if err := syncFile(filepath.Dir(dest)); err != nil {
		return BackupResult{}, fmt.Errorf("backup: %w", err)
	}
	st, err := os.Stat(dest)
	if err != nil {
		return BackupResult{}, fmt.Errorf("backup: %w", err)
	}
	res.Bytes, res.Took = st.Size(), time.Since(started)
	return res, nil
}

// checkIntegrity runs PRAGMA integrity_check on the database file at path,
// read-only.
func checkIntegrity(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path+"?"+dsnPragmas+"&_pragma=query_only(1)")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity_check: %s", strings.Join(problems, "; "))
	}
	return nil
}

// syncFile fsyncs a file or directory.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
