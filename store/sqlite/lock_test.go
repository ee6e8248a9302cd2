package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
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
	s := openTestStore(t, db, store.Options{})
	_, _, err = s.EnsureAccount(t.Context(), "acme")
	is.NoErr(err)

	is.NoErr(l.Release())
	is.NoErr(l.Release()) // idempotent
	l2, err := LockServe(db)
	is.NoErr(err) // free again once released
	is.NoErr(l2.Release())
}

func TestServingProcess(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	_, err := ServingProcess(db)
	is.True(errors.Is(err, ErrNotServing)) // no lock file yet

	l, err := LockServe(db, "config", "tls")
	is.NoErr(err)
	sv, err := ServingProcess(db)
	is.NoErr(err)                                   // held
	is.Equal(sv.PID, os.Getpid())                   // by this process
	is.Equal(sv.Reloads, []string{"config", "tls"}) // and what a reload re-reads
	_, err = LockServe(db)
	is.True(errors.Is(err, ErrLocked)) // the probe left the lock with its holder

	is.NoErr(l.Release())
	_, err = ServingProcess(db)
	is.True(errors.Is(err, ErrNotServing)) // the file still names a pid, but nobody holds it
	l, err = LockServe(db)
	is.NoErr(err) // the probe gave the lock back
	sv, err = ServingProcess(db)
	is.NoErr(err)
	is.Equal(len(sv.Reloads), 0) // a serve with nothing to reload says so
	is.NoErr(l.Release())
}

// A process that holds the lock file but did not write itself as svcgw
// serve (a pid written by hand, say) is never named for a signal.
func TestServingProcess_OnlySvcgwServe(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	f, err := os.OpenFile(db+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	is.NoErr(err)
	defer f.Close()
	is.NoErr(lockFile(f))
	defer unlockFile(f)
	_, err = f.WriteString("1\n")
	is.NoErr(err)
	_, err = ServingProcess(db)
	is.True(errors.Is(err, ErrNotServing))                                        // held, but not by svcgw serve
	is.True(strings.Contains(err.Error(), "did not write itself as svcgw serve")) // and it says so
}
