package sqlite

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// yieldCPU lets the goroutines waiting to run go first between the
// statements of a ledger commit when the process has one P (GOMAXPROCS 1,
// as on a one-core container or a process pinned to one core). A commit is
// CPU only (the WAL is not synced per commit), and without it a request
// that arrives meanwhile waits for the whole commit; with it, for one
// statement at most.
//
// "Arrives" is the network's business, and runtime.Gosched alone does not
// reach it: with one P the scheduler polls the network only when it has
// nothing else to run (and sysmon, every 10 ms), and a goroutine that calls
// Gosched waits in the global run queue, which the scheduler takes before
// it polls. So between a commit's statements only goroutines that were
// already runnable ran; a call whose request or upstream reply came in
// during the commit was seen when the commit was over. yieldCPU therefore
// parks the ledger until a goroutine that the network poller wakes lets it
// go on (netYield): the poll that wakes that goroutine wakes those calls
// too, and they run first (once in 61 schedules the scheduler's fairness
// check takes the global queue first, and they run one statement later).
// BenchmarkLedgerTailNet measures it; TestYieldCPU_RunsWhatTheNetworkWoke
// holds it.
func yieldCPU() {
	if runtime.GOMAXPROCS(0) != 1 || noCommitYield.Load() {
		return
	}
	if goschedYield.Load() || !netYield() {
		runtime.Gosched()
	}
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

// netYield parks the caller until the scheduler has polled the network and
// run what the poll woke, and the goroutines runnable before it. It writes
// a byte to a pipe whose other end a goroutine of its own reads through
// the network poller; with one P that goroutine is woken only by a poll,
// and yields once more (the rest of the poll's goroutines go first) before
// it lets the caller go on. The cost is four system calls, ~2.6 µs of CPU
// a yield (BenchmarkYieldCPU). It reports false, and yieldCPU falls back
// to Gosched, when the pipe cannot be had.
func netYield() bool {
	p := &netPoke
	p.once.Do(p.start)
	if p.w == nil || p.failed.Load() {
		return false
	}
	if _, err := p.w.Write(pokeByte); err != nil {
		return false
	}
	<-p.done
	return true
}

var (
	netPoke  poker
	pokeByte = []byte{0}
)

type poker struct {
	once   sync.Once
	w      *os.File
	done   chan struct{}
	failed atomic.Bool
}

func (p *poker) start() {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	p.done = make(chan struct{})
	go p.run(r)
	// One round first: from then on the goroutine is back in the poller
	// (with one P it parks there before the waiter runs again), so the
	// next yield's byte is seen by a poll, not by a read that finds it.
	if _, err := w.Write(pokeByte); err != nil {
		return
	}
	<-p.done
	p.w = w
}

func (p *poker) run(r *os.File) {
	var b [1]byte
	for {
		if _, err := r.Read(b[:]); err != nil {
			// The pipe is never closed, so this is not expected: whoever
			// waits is let go, and the yields that follow are Gosched's.
			p.failed.Store(true)
			close(p.done)
			return
		}
		runtime.Gosched()
		p.done <- struct{}{}
	}
}
