package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, roots, floor uint64
		want               int
	}{
		{0, 0, 32 * mib, 800},              // the runtime's heap minimum, 4 MiB × 8, is the floor
		{1 * mib, 0, 32 * mib, 800},        // the same while the heap is tiny
		{2 * mib, 1 * mib, 64 * mib, 1600}, // 64 MiB: 4 MiB × 16
		{4 * mib, 0, 16 * mib, 300},        // 4 + 4 × 3 = 16
		{1 * mib, 0, 4 * mib, 100},         // a floor of 4 MiB is the runtime's own minimum
		{4 * mib, 0, 32 * mib, 700},        // svcgw at saturation: a collection every 28 MiB instead of 4
		{3 * mib, 1 * mib, 32 * mib, 725},  // 3 + (3+1) × 7.25 = 32
		{15 * mib, 0, 32 * mib, 113},       //
		{16 * mib, 0, 32 * mib, 100},       // half the floor: the runtime's own from here
		{15 * mib, 2 * mib, 32 * mib, 100}, // … or a little below, counting the roots
		{40 * mib, 1 * mib, 32 * mib, 100}, // 1,000 open streams: unchanged
		{64 * mib, 0, 32 * mib, 100},
	} {
		if got := gcPercentFor(tc.live, tc.roots, tc.floor); got != tc.want {
			t.Errorf("gcPercentFor(%d, %d, %d) = %d, want %d", tc.live, tc.roots, tc.floor, got, tc.want)
		}
	}
}

// heapGoal is the runtime's heap goal now.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitGoal collects and waits for the floor's cleanup to set GOGC from
// what the collection found.
func waitGoal(t *testing.T, ok func(goal uint64) bool) uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if g := heapGoal(); ok(g) || time.Now().After(deadline) {
			return g
		}
	}
}

var sink []byte

func TestGCFloor(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		// The operator's setting wins: the floor stays off.
		stop := startGCFloor(64 << 20)
		defer stop()
		if floorOn != nil {
			t.Fatal("the floor started although GOGC or GOMEMLIMIT is set")
		}
		return
	}
	const floor = 64 << 20
	stop := startGCFloor(floor)
	// A small live heap grows to the floor before it is collected.
	if g := waitGoal(t, func(g uint64) bool { return g >= floor*95/100 }); g < floor*95/100 || g > floor*105/100 {
		t.Fatalf("heap goal %d MiB with a small live heap, want the floor, %d MiB", g>>20, floor>>20)
	}
	// A live heap past half the floor is paced as the runtime does.
	sink = make([]byte, 48<<20)
	if g := waitGoal(t, func(g uint64) bool { return g >= 96<<20 }); g < 96<<20 || g > 120<<20 {
		t.Fatalf("heap goal %d MiB with 48 MiB live, want about twice the live heap", g>>20)
	}
	floorMu.Lock()
	g := floorOn
	floorMu.Unlock()
	g.mu.Lock()
	p := g.percent
	g.mu.Unlock()
	if p != 100 {
		t.Fatalf("GOGC %d with 48 MiB live, want 100", p)
	}
	sink = nil
	stop()
	stop() // twice is once
	if floorOn != nil || floorUsers != 0 {
		t.Fatal("the floor is still on after stop")
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC %d after stop, want it restored to 100", p)
	}
	// With the environment's GOGC, no floor.
	t.Setenv("GOGC", "100")
	defer startGCFloor(floor)()
	if floorOn != nil {
		t.Fatal("the floor started although GOGC is set")
	}
}
