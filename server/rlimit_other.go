//go:build !unix

package server

// fileLimit is a conservative file limit where the system has no
// RLIMIT_NOFILE (Windows handles are far more plentiful).
func fileLimit() uint64 { return 4096 }
