package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrLocked means another process is serving the database (LockServe).
var ErrLocked = errors.New("another svcgw serve is using this database")

// ServeLock is the lock a serving process holds on its database for its
// whole life. Two servers on one file would each admit calls against the
// same balance, each counting only its own charges: LockServe refuses the
// second. The admin commands (keys, credits, usage) take no lock and work
// beside a running server.
//
// The lock is an OS file lock (flock, LockFileEx on Windows) on a file of
// its own, the database's path + ".lock", never on SQLite's files: SQLite
// locks the database with POSIX record locks, which a process loses all of
// when it closes any descriptor of the file, so opening the database file
// for a lock of ours could drop SQLite's. The kernel releases the lock when
// the process ends, however it ends; the file stays, and holds the pid of
// the last process that took the lock.
type ServeLock struct {
	f *os.File
}

// LockServe takes the serve lock of the database at dbPath, or fails with
// ErrLocked, naming the holder's pid when it can, if another process holds
// it. Release it when the server is done.
func LockServe(dbPath string) (*ServeLock, error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("serve lock: %w", err)
	}
	if err := lockFile(f); err != nil {
		defer f.Close()
		if errors.Is(err, errWouldBlock) {
			holder := "another process"
			if pid := readPID(f); pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("%w: its lock file %s is held by %s", ErrLocked, path, holder)
		}
		return nil, fmt.Errorf("serve lock %s: %w", path, err)
	}
	// Tell the next process to try who holds it.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &ServeLock{f: f}, nil
}

// Release gives the lock up. It is safe on nil and idempotent.
func (l *ServeLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := errors.Join(unlockFile(l.f), l.f.Close())
	l.f = nil
	return err
}

// errWouldBlock is lockFile's answer when another process holds the lock.
var errWouldBlock = errors.New("lock held elsewhere")

// readPID reads the pid a lock holder wrote, or 0.
func readPID(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// ErrNotServing means no process holds a database's serve lock.
var ErrNotServing = errors.New("no svcgw serve is running on this database")

// ServingPID returns the pid of the process that holds the serve lock of
// the database at dbPath (the svcgw serve running on it), for commands that
// signal it (svcgw config reload). When nobody holds the lock it fails with
// ErrNotServing: the pid a lock file keeps after its holder ended is never
// returned, so a stale file never points a signal at another process.
func ServingPID(dbPath string) (int, error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w (no %s)", ErrNotServing, path)
	}
	if err != nil {
		return 0, fmt.Errorf("serve lock: %w", err)
	}
	defer f.Close()
	// The lock is free when this probe can take it; it gives it back at
	// once.
	switch err := lockFile(f); {
	case err == nil:
		_ = unlockFile(f)
		return 0, fmt.Errorf("%w (%s is not held)", ErrNotServing, path)
	case !errors.Is(err, errWouldBlock):
		return 0, fmt.Errorf("serve lock %s: %w", path, err)
	}
	pid := readPID(f)
	if pid <= 0 {
		return 0, fmt.Errorf("serve lock %s is held, but names no pid", path)
	}
	return pid, nil
}
