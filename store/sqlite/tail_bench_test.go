package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
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
// not. Its calls are woken by a timer, which the scheduler checks at every
// switch, so runtime.Gosched served them as well as netYield does; calls
// that arrive over the network are BenchmarkLedgerTailNet's. Timer and
// machine noise add to every variant alike; compare them within a run.
// The checkpoint variants (checkpoint.go) run at the default interval,
// yielding; at 2,000 calls/s the WAL passes 1,000 pages about
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
			s := openTestStore(b, filepath.Join(b.TempDir(), "svcgw.db"), store.Options{BatchInterval: v.interval, Checkpoint: v.checkpoint})
			_, k, _ := storetest.NewAccount(b, s, "acme", "1000000")
			g := storetest.Gen(b, "", k, "0.000123")
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

// BenchmarkLedgerTailNet is BenchmarkLedgerTail with the calls arriving
// over the network, as bench/run.sh's do: a second process (this test
// binary again, TestTailPacer) sends a timestamp on a loopback TCP
// connection every 500 µs, and each call is a read of one, ~20 µs of work
// and a generation recorded. A call is late by the time from its send to
// its read returning. With one P the scheduler sees a socket become
// readable only when it polls the network, so this measures what the timer
// of BenchmarkLedgerTail cannot: how long a commit keeps arrivals unseen.
// yield= is what the ledger does between a commit's statements: none,
// runtime.Gosched alone, or netYield (the default). The process runs at
// GOMAXPROCS 1 and the sender has its own; compare the variants one
// invocation at a time, alternated (-bench 'LedgerTailNet/yield=gosched$',
// then 'net$'), on in-commit-late-p50-µs: the lateness of the calls sent
// while a commit ran, which the machine's noise moves least.
func BenchmarkLedgerTailNet(b *testing.B) {
	for _, yield := range []string{"none", "gosched", "net"} {
		b.Run("yield="+yield, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			noCommitYield.Store(yield == "none")
			goschedYield.Store(yield == "gosched")
			defer noCommitYield.Store(false)
			defer goschedYield.Store(false)
			// The commits' windows (Unix ns), to tell the calls sent during
			// one from the others.
			var mu sync.Mutex
			var commits [][2]int64
			onCommit := func(c store.LedgerCommit) {
				end := time.Now().UnixNano()
				mu.Lock()
				commits = append(commits, [2]int64{end - c.Duration.Nanoseconds(), end})
				mu.Unlock()
			}
			s := openTestStore(b, filepath.Join(b.TempDir(), "svcgw.db"), store.Options{OnCommit: onCommit})
			_, k, _ := storetest.NewAccount(b, s, "acme", "1000000")
			g := storetest.Gen(b, "", k, "0.000123")
			var late []time.Duration
			var sent []int64
			var sched float64
			n := 0
			cpu0 := processCPU()
			for b.Loop() {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestTailPacer$")
				cmd.Env = append(os.Environ(), "SVCGW_TAIL_PACER="+ln.Addr().String())
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				c, err := ln.Accept()
				ln.Close()
				if err != nil {
					b.Fatal(err)
				}
				before := schedLatencies()
				var ts [8]byte
				for {
					if _, err := io.ReadFull(c, ts[:]); err != nil {
						break
					}
					at := int64(binary.LittleEndian.Uint64(ts[:]))
					late = append(late, time.Duration(time.Now().UnixNano()-at))
					sent = append(sent, at)
					spin(20 * time.Microsecond)
					g.ID = "chatcmpl-" + strconv.Itoa(n)
					n++
					s.RecordGeneration(g)
				}
				sched = max(sched, quantile(before, schedLatencies(), 0.99))
				c.Close()
				if err := cmd.Wait(); err != nil {
					b.Fatal("pacer:", err)
				}
			}
			if err := s.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/float64(n), "cpu-µs/call")
			// Calls sent while a commit ran: how late they were is what the
			// commit and the yields between its statements decide, apart
			// from what the machine does to every call alike.
			mu.Lock()
			slices.SortFunc(commits, func(a, b [2]int64) int { return int(a[0] - b[0]) })
			var inCommit []time.Duration
			for i, at := range sent {
				j, _ := slices.BinarySearchFunc(commits, at, func(c [2]int64, t int64) int { return int(c[0] - t) })
				if j > 0 && at < commits[j-1][1] {
					inCommit = append(inCommit, late[i])
				}
			}
			mu.Unlock()
			slices.Sort(inCommit)
			if len(inCommit) > 0 {
				b.ReportMetric(float64(len(inCommit)), "in-commit-calls")
				b.ReportMetric(float64(inCommit[len(inCommit)/2].Microseconds()), "in-commit-late-p50-µs")
				b.ReportMetric(float64(inCommit[len(inCommit)*9/10].Microseconds()), "in-commit-late-p90-µs")
			}
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)/2].Microseconds()), "late-p50-µs")
			b.ReportMetric(float64(late[len(late)*99/100].Microseconds()), "late-p99-µs")
			b.ReportMetric(float64(late[len(late)*999/1000].Microseconds()), "late-p99.9-µs")
			b.ReportMetric(sched*1e6, "sched-p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestTailPacer is BenchmarkLedgerTailNet's sender, run in a process of
// its own (it does nothing unless SVCGW_TAIL_PACER names the address): for
// tailRun, every tailEvery, the time of sending (Unix ns) as 8 bytes.
func TestTailPacer(t *testing.T) {
	addr := os.Getenv("SVCGW_TAIL_PACER")
	if addr == "" {
		t.Skip("BenchmarkLedgerTailNet's sender; runs only as its child")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ts [8]byte
	start := time.Now()
	for due := start; due.Sub(start) < tailRun; due = due.Add(tailEvery) {
		time.Sleep(time.Until(due))
		binary.LittleEndian.PutUint64(ts[:], uint64(time.Now().UnixNano()))
		if _, err := c.Write(ts[:]); err != nil {
			t.Fatal(err)
		}
	}
}
