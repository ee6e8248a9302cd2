package store

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// YieldCPU lets the goroutines waiting to run go first, those the network
// has woken included, when the process has one P (GOMAXPROCS 1, as on a
// one-core container or a process pinned to one core); with more it
// returns at once, since an idle P polls the network itself.
//
// "Woken by the network" is what runtime.Gosched alone does not reach:
// with one P the scheduler polls the network only when it has nothing else
// to run (and sysmon, every 10 ms), and a goroutine that calls Gosched
// waits in the global run queue, which the scheduler takes before it
// polls. So a goroutine that runs for milliseconds and calls Gosched
// between its steps lets only the goroutines that were already runnable
// in; a call whose request or upstream reply arrives meanwhile is seen
// when the P next has nothing to run, or by sysmon's poll 10 ms later, at
// each of its steps. YieldCPU therefore parks its caller until a goroutine
// that the network poller wakes lets it go on (netYield): the poll that
// wakes that goroutine wakes those calls too, and they run first (once in
// 61 schedules the scheduler's fairness check takes the global queue
// first, and they run one yield later). The ledger writer yields so
// between a commit's statements (store/sqlite/yield.go); long reads, with
// a Slicer. It costs about 2.6 µs of CPU a yield (four system calls).
func YieldCPU() {
	if runtime.GOMAXPROCS(0) != 1 {
		return
	}
	if !netYield() {
		runtime.Gosched()
	}
}

// ReadSlice is how long a read of the management API or the account
// endpoints runs on the processor, at most, between two yields (Slicer):
// with one P, what a call that arrives meanwhile may wait for it. A yield
// costs ~2.6 µs, 2.6% of a slice.
const ReadSlice = 100 * time.Microsecond

// A Slicer cuts a long read into slices of ReadSlice: its Yield, called
// between the read's steps (rows, accounts), calls YieldCPU once a slice
// has passed since the Slicer's first Yield or its last yield. The zero
// value is ready; a Slicer is one goroutine's.
type Slicer struct {
	since time.Time
}

// Yield yields the processor if a slice has passed (see Slicer).
func (s *Slicer) Yield() {
	now := time.Now()
	if s.since.IsZero() {
		s.since = now
		return
	}
	if now.Sub(s.since) < ReadSlice {
		return
	}
	YieldCPU()
	s.since = time.Now()
}

// netYield parks the caller until the scheduler has polled the network and
// run what the poll woke, and the goroutines runnable before it. It writes
// a byte to a pipe whose other end a goroutine of its own reads through
// the network poller; with one P that goroutine is woken only by a poll,
// and yields once more (the rest of the poll's goroutines go first) before
// it lets the caller go on. Callers may be many: each byte lets one go.
// It reports false, and YieldCPU falls back to Gosched, when the pipe
// cannot be had.
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
