package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcFloor keeps the garbage collector's heap goal at max(2 × the live
// heap, floor) instead of the runtime's 2 × live: svcgw's live heap at
// rest is a few MB, so at GOGC=100 the runtime collects every few MB
// allocated, every couple of hundred calls at saturation (~20 KB each),
// and each collection scans every goroutine's stack and the binary's
// globals whatever the heap holds. After each collection it sets GOGC
// from the live heap the collection found so that the next goal is the
// floor, never below 100. Once the live heap is past about half the floor
// (1,000 open streams hold ~40 MB) GOGC is 100 again, so the floor
// raises no peak that a large live heap sets; it only lets a small heap
// grow to the floor between collections.
//
// GOGC or GOMEMLIMIT in the environment is the operator's choice and
// wins: the floor is then off, as it is with floor 0.
type gcFloor struct {
	floor   uint64
	mu      sync.Mutex
	stopped bool
	percent int // last set
	prev    int // GOGC before start
	sample  []metrics.Sample
}

// The process has one collector: serves running at once in one process
// (tests) share the first one's floor until the last stops.
var (
	floorMu    sync.Mutex
	floorUsers int
	floorOn    *gcFloor
)

// startGCFloor starts the floor (of floor bytes) unless the environment
// sets GOGC or GOMEMLIMIT, or floor is 0. stop ends it and restores GOGC.
func startGCFloor(floor uint64) (stop func()) {
	if floor == 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	floorMu.Lock()
	defer floorMu.Unlock()
	if floorUsers == 0 {
		g := &gcFloor{floor: floor, sample: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
		g.prev = debug.SetGCPercent(100)
		g.percent = 100
		g.adjust()
		g.arm()
		floorOn = g
	}
	floorUsers++
	var once sync.Once
	return func() {
		once.Do(func() {
			floorMu.Lock()
			defer floorMu.Unlock()
			if floorUsers--; floorUsers == 0 {
				floorOn.stop()
				floorOn = nil
			}
		})
	}
}

// arm runs adjust after the next collection: a cleanup of an object
// nothing references runs once the collection that finds it unreachable
// is over, and arms the next one.
func (g *gcFloor) arm() {
	runtime.AddCleanup(new([16]byte), func(g *gcFloor) {
		if g.adjust() {
			g.arm()
		}
	}, g)
}

// adjust sets GOGC for the live heap the last collection found; false
// once stopped.
func (g *gcFloor) adjust() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	metrics.Read(g.sample)
	live := g.sample[0].Value.Uint64()
	roots := g.sample[1].Value.Uint64() + g.sample[2].Value.Uint64()
	p := gcPercentFor(live, roots, g.floor)
	if p != g.percent {
		debug.SetGCPercent(p)
		g.percent = p
	}
	return true
}

// gcPercentFor is the GOGC that puts the heap goal at the floor, or
// 100 when that goal is larger. The runtime's goal is live + (live +
// roots) × GOGC/100, roots being the stacks and globals a collection
// scans too, and never below its heap minimum, 4 MiB × GOGC/100: GOGC is
// at most floor/4 MiB × 100, where that minimum is the floor.
func gcPercentFor(live, roots, floor uint64) int {
	most := floor * 100 / (4 << 20)
	if live >= floor || most <= 100 {
		return 100
	}
	if live+roots == 0 {
		return int(most)
	}
	return int(max(100, min((floor-live)*100/(live+roots), most)))
}

func (g *gcFloor) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	debug.SetGCPercent(g.prev)
}
