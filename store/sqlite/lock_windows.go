//go:build windows

package sqlite

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockRange is the byte range locked: one byte at 4 GiB, far past the pid
// the holder writes at the start (a locked range cannot be read by
// another process on Windows).
var lockRange = windows.Overlapped{OffsetHigh: 1}

// lockFile takes an exclusive lock on f without waiting.
func lockFile(f *os.File) error {
	ol := lockRange
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errWouldBlock
	}
	return err
}

func unlockFile(f *os.File) error {
	ol := lockRange
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
