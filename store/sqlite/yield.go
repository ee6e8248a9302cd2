package sqlite

import (
	"runtime"
	"sync/atomic"

	"github.com/svcgw/svcgw/store"
)

// yieldCPU is store.YieldCPU (which explains it) between the statements of
// a ledger commit and before a checkpoint: a commit is CPU only (the WAL
// is not synced per commit), and without it a request that arrives
// meanwhile waits for the whole commit; with it, for one statement at
// most. BenchmarkLedgerTailNet measures it; store's
// TestYieldCPU_RunsWhatTheNetworkWoke holds it.
func yieldCPU() {
	if runtime.GOMAXPROCS(0) != 1 || noCommitYield.Load() {
		return
	}
	if goschedYield.Load() {
		runtime.Gosched()
		return
	}
	store.YieldCPU()
}

// yieldCommit is yieldCPU between the statements of a commit of batch
// generations, while the ledger keeps up: not when another full batch is
// waiting beyond this one. Then the calls a yield would let in are what
// the ledger is behind on, and at saturation yielding between statements
// kept the writer below the calls' rate until the queue passed its limit
// and billable calls were refused (bench/RESULTS.md, "Refused calls at
// saturation"):
// behind, a commit runs straight through, and the calls that arrive wait
// for it, a commit of a batch's CPU at most.
func (s *Store) yieldCommit(batch int) {
	behind := s.Pending()-int64(batch) >= int64(s.BatchSize())
	if yieldCommitHook != nil {
		yieldCommitHook(behind)
	}
	if !behind {
		yieldCPU()
	}
}

// yieldCommitHook, when set (tests), is told of each of a commit's yields
// whether it was skipped, the ledger being behind.
var yieldCommitHook func(skipped bool)

// noCommitYield turns yieldCPU off, and goschedYield makes it
// runtime.Gosched alone, for BenchmarkLedgerTail's comparisons.
var noCommitYield, goschedYield atomic.Bool
