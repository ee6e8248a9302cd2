package store

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestLockServe(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	l, err := LockServe(db)
	is.NoErr(err) // the first takes it

	_, err = LockServe(db)
	is.True(errors.Is(err, ErrLocked))                                                   // the second is refused
	is.True(strings.Contains(err.Error(), "held by process "+strconv.Itoa(os.Getpid()))) // naming the holder
	is.True(strings.Contains(err.Error(), db+".lock"))

	// SQLite's own files are not touched: the database opens and writes.
	s := openTestStore(t, db, Options{})
	_, _, err = s.EnsureAccount(t.Context(), "acme")
	is.NoErr(err)

	is.NoErr(l.Release())
	is.NoErr(l.Release()) // idempotent
	l2, err := LockServe(db)
	is.NoErr(err) // free again once released
	is.NoErr(l2.Release())
}

func TestServingPID(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	_, err := ServingPID(db)
	is.True(errors.Is(err, ErrNotServing)) // no lock file yet

	l, err := LockServe(db)
	is.NoErr(err)
	pid, err := ServingPID(db)
	is.NoErr(err)              // held
	is.Equal(pid, os.Getpid()) // by this process
	_, err = LockServe(db)
	is.True(errors.Is(err, ErrLocked)) // the probe left the lock with its holder

	is.NoErr(l.Release())
	_, err = ServingPID(db)
	is.True(errors.Is(err, ErrNotServing)) // the file still names a pid, but nobody holds it
	l, err = LockServe(db)
	is.NoErr(err) // the probe gave the lock back
	is.NoErr(l.Release())
}
