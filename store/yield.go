package store

import (
	"runtime"
	"sync/atomic"
)

// yieldCPU lets the goroutines waiting to run go first between the
// statements of a ledger commit when the process has one P (GOMAXPROCS 1,
// as on a one-core container or a process pinned to one core). A commit is
// CPU only (the WAL is not synced per commit), and without it a request
// that arrives meanwhile waits for the whole commit; with it, for one
// statement at most (BenchmarkLedgerTail).
func yieldCPU() {
	if runtime.GOMAXPROCS(0) == 1 && !noCommitYield.Load() {
		runtime.Gosched()
	}
}

// noCommitYield turns yieldCPU off, for BenchmarkLedgerTail's comparison.
var noCommitYield atomic.Bool
