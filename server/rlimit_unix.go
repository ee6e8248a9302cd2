//go:build unix

package server

import "syscall"

// fileLimit is the process's soft limit on open files.
func fileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024 // the usual default soft limit
	}
	return uint64(rl.Cur) // RLIM_INFINITY is the largest value: the cap applies

}
