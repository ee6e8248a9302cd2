package cli

import (
	"os"
	"runtime"
	"strings"
	"sync"
)

// memProfileOff turns the runtime's memory profiling off for a serve
// without an admin listener, the only place svcgw serves a heap profile:
// nobody can read what it records. Left on, the runtime walks the stack
// of one allocation in every 512 KiB and keeps a record of each distinct
// stack for the life of the process (the record table alone is 1.4 MB
// once touched), and the walks map more of the binary's function tables:
// at the peak of 1,000 open streams, ~1 MiB of RSS (bench/RESULTS.md,
// "The peak of (d): the binary's pages and the memory profiler"). A
// rate the operator chose in GODEBUG (memprofilerate=N,
// read by the runtime at start) is left as it is; so is a process that
// served with an admin listener before (a test's), whatever serves after.
func memProfileOff(adminAddr string) {
	if adminAddr != "" {
		memProfileOnce.Do(func() {}) // profiles are readable: keep recording
		return
	}
	memProfileOnce.Do(func() {
		if !godebugNames(os.Getenv("GODEBUG"), "memprofilerate") {
			runtime.MemProfileRate = 0
		}
	})
}

var memProfileOnce sync.Once

// godebugNames reports whether a GODEBUG value sets key.
func godebugNames(godebug, key string) bool {
	for field := range strings.SplitSeq(godebug, ",") {
		if k, _, ok := strings.Cut(field, "="); ok && strings.TrimSpace(k) == key {
			return true
		}
	}
	return false
}
