package store

import (
	"fmt"
	"runtime"
)

// Whether the ledger commit runs beside the calls or between them when the
// process has one P (GOMAXPROCS 1: a one-core container, a process pinned
// to one core). Options.Commit chooses, `svcgw serve --ledger-commit` sets
// it. SQLite only: modernc's SQLite is Go code, so its commit holds a P
// for its CPU (~0.4 ms every 20 ms at 2,000 calls/s), where PostgreSQL's
// waits on the network without one.
const (
	// CommitInline (the default) runs the commit on the one P, yielding
	// to the goroutines waiting to run between its statements (yieldCPU):
	// a call due meanwhile waits for one statement at most.
	CommitInline = "inline"
	// CommitAside gives the runtime a second P (GOMAXPROCS 2) from the
	// moment a commit starts until it and its checkpoint are over: the
	// calls go on running on a thread of their own, which
	// the kernel shares the core with, instead of waiting on the commit's.
	// Each switch stops the world for a few microseconds (the pair ~8 µs,
	// BenchmarkProcsAside), and setting GOMAXPROCS turns off the runtime's
	// own updates of it (to the CPUs the process may use): a process moved
	// to more cores keeps one P. Unlike a checkpoint, whose fsyncs the
	// second P runs beside, a commit is CPU only: the kernel then shares
	// the core between the two threads in its own slices, coarser than the
	// statements inline yields between, and the second P's thread wakes
	// and sleeps for every call meanwhile. Measured on one core
	// (BenchmarkLedgerTail's commit=aside, bench/RESULTS.md, session 5):
	// 6% more CPU a call, and the calls no less late.
	CommitAside = "aside"
)

// commitMode checks mode and reports whether it is CommitAside.
func commitMode(mode string) (aside bool, err error) {
	switch mode {
	case "", CommitInline:
		return false, nil
	case CommitAside:
		return true, nil
	}
	return false, fmt.Errorf("commit mode %q: want %q or %q", mode, CommitInline, CommitAside)
}

// procsAside gives the runtime a second P when it has one and the ledger
// commits aside; it reports whether it did, for procsBack.
func (s *ledgerCore) procsAside() bool {
	if !s.commitAside || runtime.GOMAXPROCS(0) != 1 {
		return false
	}
	runtime.GOMAXPROCS(2)
	return true
}

// procsBack takes back the P procsAside gave.
func procsBack(gave bool) {
	if gave {
		runtime.GOMAXPROCS(1)
	}
}
