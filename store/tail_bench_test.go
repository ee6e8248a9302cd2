package store

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLedgerTail measures what the ledger's commits do to the calls
// that share their core, as in bench/run.sh's constant-rate scenario:
// with GOMAXPROCS 1, a caller due every 500 µs (2,000 calls/s) does ~20 µs
// of work and records a generation, for tailRun. A call is late by the
// time from when it was due to when it ran; a commit that holds the one P
// makes the calls due meanwhile wait for it. It reports the late p99 and
// max (µs), and the p99 of the runtime's own count of how long runnable
// goroutines waited (/sched/latencies:seconds), for the ledger's batch
// interval and for commits that yield between statements (yieldCPU) or
// not. Timer and machine noise add to every variant alike; compare them
// within a run. The checkpoint variants (checkpoint.go) run at the default
// interval, yielding; at 2,000 calls/s the WAL passes 1,000 pages about
// once a second, so compare their late-p99.9 and late-max. cpu-µs/call is
// the process's CPU (user and system) over the run, a call's share of it.
func BenchmarkLedgerTail(b *testing.B) {
	for _, v := range []struct {
		interval   time.Duration
		yield      bool
		checkpoint string
	}{
		{20 * time.Millisecond, false, ""}, {20 * time.Millisecond, true, ""},
		{5 * time.Millisecond, false, ""}, {5 * time.Millisecond, true, ""},
		{20 * time.Millisecond, true, CheckpointAfterCommit}, {20 * time.Millisecond, true, CheckpointAside},
	} {
		name := fmt.Sprintf("interval=%v/yield=%v", v.interval, v.yield)
		if v.checkpoint != "" {
			name += "/checkpoint=" + v.checkpoint
		}
		b.Run(name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			noCommitYield.Store(!v.yield)
			defer noCommitYield.Store(false)
			s := openTestStore(b, filepath.Join(b.TempDir(), "svcgw.db"), Options{BatchInterval: v.interval, Checkpoint: v.checkpoint})
			_, k, _ := newAccount(b, s, "acme", "1000000")
			g := gen(b, "", k, "0.000123")
			var late []time.Duration
			var sched float64
			n := 0
			cpu0 := processCPU()
			for b.Loop() {
				before := schedLatencies()
				start := time.Now()
				for due := start; due.Sub(start) < tailRun; due = due.Add(tailEvery) {
					time.Sleep(time.Until(due))
					late = append(late, time.Since(due))
					spin(20 * time.Microsecond)
					g.ID = "chatcmpl-" + strconv.Itoa(n)
					n++
					s.RecordGeneration(g)
				}
				sched = max(sched, quantile(before, schedLatencies(), 0.99))
			}
			if err := s.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/float64(n), "cpu-µs/call")
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)*99/100].Microseconds()), "late-p99-µs")
			b.ReportMetric(float64(late[len(late)*999/1000].Microseconds()), "late-p99.9-µs")
			b.ReportMetric(float64(late[len(late)-1].Microseconds()), "late-max-µs")
			b.ReportMetric(sched*1e6, "sched-p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

const (
	tailRun   = 3 * time.Second
	tailEvery = 500 * time.Microsecond
)

// spin burns about d of CPU, as a call's own work would.
func spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

func schedLatencies() *metrics.Float64Histogram {
	m := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(m)
	return m[0].Value.Float64Histogram()
}

// quantile is the q quantile of the samples added between two readings of
// a cumulative histogram (an upper bucket bound).
func quantile(before, after *metrics.Float64Histogram, q float64) float64 {
	var total uint64
	d := make([]uint64, len(after.Counts))
	for i := range d {
		d[i] = after.Counts[i] - before.Counts[i]
		total += d[i]
	}
	want := uint64(q * float64(total))
	var seen uint64
	for i, c := range d {
		seen += c
		if seen > want {
			return after.Buckets[i+1]
		}
	}
	return after.Buckets[len(after.Buckets)-1]
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
