package sqlite

import (
	"runtime"
	"testing"
)

// BenchmarkYieldCPU is what one yield costs the ledger with nothing else to
// run (the CPU a commit pays per statement): Gosched alone against
// netYield's pipe round.
func BenchmarkYieldCPU(b *testing.B) {
	for _, v := range []string{"gosched", "net"} {
		b.Run("yield="+v, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			goschedYield.Store(v == "gosched")
			defer goschedYield.Store(false)
			cpu0 := processCPU()
			for b.Loop() {
				yieldCPU()
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
