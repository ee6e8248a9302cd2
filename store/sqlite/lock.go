package sqlite

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

// servingMark is the lock file's second line, written by svcgw serve
// alone: a process that holds the lock without it (one that took the lock
// and wrote a pid by hand, or an older svcgw) is never signalled.
const servingMark = "svcgw serve"

// LockServe takes the serve lock of the database at dbPath, or fails with
// ErrLocked, naming the holder's pid when it can, if another process holds
// it. Release it when the server is done. reloads names what a reload of
// the serve re-reads (e.g. "config", "tls"), for ServingProcess; none means
// a reload has nothing to do.
func LockServe(dbPath string, reloads ...string) (*ServeLock, error) {
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
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+servingMark+"\nreloads="+strings.Join(reloads, ",")+"\n"), 0)
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
	return readLockFile(f).PID
}

// readLockFile reads what a lock holder wrote: its pid on the first line
// and, when it is svcgw serve, servingMark and what it reloads on the
// next two.
func readLockFile(f *os.File) Serving {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 512))
	if err != nil {
		return Serving{}
	}
	lines := strings.Split(string(b), "\n")
	var sv Serving
	if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err == nil {
		sv.PID = pid
	}
	if len(lines) >= 3 && lines[1] == servingMark {
		sv.Serve = true
		if what, ok := strings.CutPrefix(lines[2], "reloads="); ok && what != "" {
			sv.Reloads = strings.Split(what, ",")
		}
	}
	return sv
}

// Serving is what the process holding a database's serve lock wrote of
// itself (ServingProcess).
type Serving struct {
	PID int
	// Serve is whether it wrote itself as svcgw serve.
	Serve bool
	// Reloads is what a reload of it re-reads; none: nothing.
	Reloads []string
}

// ErrNotServing means no process holds a database's serve lock.
var ErrNotServing = errors.New("no svcgw serve is running on this database")

// ServingProcess returns what the process that holds the serve lock of
// the database at dbPath (the svcgw serve running on it) wrote of itself,
// for commands that signal it (svcgw config reload). When nobody holds the
// lock it fails with ErrNotServing: the pid a lock file keeps after its
// holder ended is never returned, so a stale file never points a signal at
// another process; nor is the pid of a holder that is not svcgw serve.
func ServingProcess(dbPath string) (Serving, error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Serving{}, fmt.Errorf("%w (no %s)", ErrNotServing, path)
	}
	if err != nil {
		return Serving{}, fmt.Errorf("serve lock: %w", err)
	}
	defer f.Close()
	// The lock is free when this probe can take it; it gives it back at
	// once.
	switch err := lockFile(f); {
	case err == nil:
		_ = unlockFile(f)
		return Serving{}, fmt.Errorf("%w (%s is not held)", ErrNotServing, path)
	case !errors.Is(err, errWouldBlock):
		return Serving{}, fmt.Errorf("serve lock %s: %w", path, err)
	}
	sv := readLockFile(f)
	switch {
	case sv.PID <= 0:
		return Serving{}, fmt.Errorf("serve lock %s is held, but names no pid", path)
	case !sv.Serve:
		return Serving{}, fmt.Errorf("%w: %s is held by process %d, which did not write itself as svcgw serve", ErrNotServing, path, sv.PID)
	}
	return sv, nil
}
