//go:build !unix && !windows

package sqlite

import "os"

// lockFile cannot lock on this platform: serving is not guarded there.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
