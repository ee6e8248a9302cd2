package store

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestCommitModes commits batches in each commit mode, starting from one P
// and from two, and reads GOMAXPROCS inside each commit (CommitHook runs
// in the transaction, after every statement but the COMMIT): CommitAside
// runs a one-P process's commit with two and gives the second back after
// it (and after a failed commit, before the retry's wait); CommitInline
// and a process that has two already are left as they are.
func TestCommitModes(t *testing.T) {
	for _, c := range []struct {
		mode        string
		procs, want int
	}{
		{"", 1, 1}, {CommitInline, 1, 1}, {CommitAside, 1, 2},
		{CommitInline, 2, 2}, {CommitAside, 2, 2},
	} {
		t.Run("mode="+c.mode+"/procs="+strconv.Itoa(c.procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			var inCommit, hooked atomic.Int64
			var fail atomic.Bool
			path := filepath.Join(t.TempDir(), "svcgw.db")
			s := openTestStore(t, path, Options{BatchInterval: time.Hour, Commit: c.mode,
				Checkpoint: CheckpointAside, RetryInterval: 10 * time.Millisecond,
				CommitHook: func() error {
					inCommit.Store(int64(runtime.GOMAXPROCS(0)))
					if hooked.Add(1); fail.Load() {
						return errors.New("disk on fire")
					}
					return nil
				}})
			_, k, _ := newAccount(t, s, "acme", "1000000")
			g := gen(t, "", k, "0.000123")
			for round := range 60 {
				commitRound(t, s, g, round)
				if p := inCommit.Load(); p != int64(c.want) {
					t.Fatalf("round %d: GOMAXPROCS %d in the commit, want %d", round, p, c.want)
				}
				if p := settledProcsAt(c.procs); p != c.procs {
					t.Fatalf("round %d: GOMAXPROCS %d after the commit, want %d", round, p, c.procs)
				}
			}
			// A failing commit gives the P back before the writer waits to
			// retry.
			fail.Store(true)
			before := hooked.Load()
			s.RecordGeneration(gen(t, "chatcmpl-failing", k, "0.000123"))
			go s.Sync(context.Background()) // commits at once (and fails)
			for hooked.Load() < before+3 {
				time.Sleep(time.Millisecond)
			}
			if p := inCommit.Load(); p != int64(c.want) {
				t.Errorf("GOMAXPROCS %d in a failing commit, want %d", p, c.want)
			}
			if p := settledProcsAt(c.procs); p != c.procs {
				t.Errorf("GOMAXPROCS %d while the writer waits to retry, want %d", p, c.procs)
			}
			fail.Store(false)
			deadline := time.Now().Add(5 * time.Second)
			for err := s.Sync(context.Background()); err != nil; err = s.Sync(context.Background()) {
				if time.Now().After(deadline) { // Sync fails at once while the ledger is failing
					t.Fatalf("the ledger did not recover: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

func TestCommitModeUnknown(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), Options{Commit: "sideways"})
	if err == nil || errors.Is(err, ErrNoDatabase) {
		t.Fatalf("Open with an unknown commit mode: %v, want an error naming the modes", err)
	}
}

// settledProcsAt is GOMAXPROCS once it is back at want, or 5 s later: the
// writer gives its second P back after answering the commit's waiters.
func settledProcsAt(want int) int {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p := runtime.GOMAXPROCS(0); p == want {
			return p
		}
	}
	return runtime.GOMAXPROCS(0)
}

// BenchmarkProcsAside is what CommitAside adds to each commit of a one-P
// process: GOMAXPROCS 1 → 2 → 1, two stops of the world, with idle
// goroutines parked as a server's are. It reports the pair's wall time
// (ns/op) and the runtime's own count of the world's stops, the p99 and
// total of their pauses a pair.
func BenchmarkProcsAside(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	park := make(chan struct{})
	defer close(park)
	for range 1000 {
		go func() { <-park }()
	}
	s := []metrics.Sample{{Name: "/sched/pauses/total/other:seconds"}}
	metrics.Read(s)
	before := s[0].Value.Float64Histogram()
	before = &metrics.Float64Histogram{Counts: append([]uint64(nil), before.Counts...), Buckets: before.Buckets}
	for b.Loop() {
		runtime.GOMAXPROCS(2)
		runtime.GOMAXPROCS(1)
	}
	metrics.Read(s)
	after := s[0].Value.Float64Histogram()
	var n uint64
	var total float64
	for i, c := range after.Counts {
		d := c - before.Counts[i]
		n += d
		if d > 0 && !math.IsInf(after.Buckets[i+1], 0) {
			total += float64(d) * after.Buckets[i+1] // the bucket's upper bound
		}
	}
	b.ReportMetric(quantile(before, after, 0.99)*1e6, "pause-p99-µs")
	b.ReportMetric(total/float64(b.N)*1e6, "pause-µs/op")
	b.ReportMetric(float64(n)/float64(b.N), "pauses/op")
}
