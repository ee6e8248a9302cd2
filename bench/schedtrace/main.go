//go:build bench

// Command schedtrace reads a Go execution trace (bench/run.sh with
// BENCH_PROFILE=1 BENCH_TRACE=1 saves one of svcgw per measured phase) and
// says who held the P: how long runnable goroutines waited (quantiles), how
// long each kind of goroutine ran at a stretch (a syscall counts as holding
// the P, as it does unless the runtime hands the P off), and, for the waits
// of at least -long, what ran meanwhile. Kinds come from the goroutine's
// stack where it stopped running (the ledger, a WAL checkpoint — an episode
// that made a syscall from inside one —, net/http's connection goroutines,
// the GC) or else its entry function. On a shared machine a stretch also
// counts time the kernel gave the core to another process.
//
// Usage: go -C bench run -tags bench ./schedtrace [-top N] [-long D] trace.out
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

type span struct {
	start, end trace.Time
	g          trace.GoID
	cat        string
	stack      string
}

type wait struct {
	start, end trace.Time
	g          trace.GoID
}

func main() {
	top := flag.Int("top", 15, "longest running spans to print")
	threshold := flag.Duration("long", time.Millisecond, "waits at least this long are attributed")
	flag.Parse()
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		panic(err)
	}
	r, err := trace.NewReader(f)
	if err != nil {
		panic(err)
	}
	entry := map[trace.GoID]string{}
	running := map[trace.GoID]trace.Time{}
	ckpt := map[trace.GoID]bool{} // the running episode went through a WAL checkpoint
	runnable := map[trace.GoID]trace.Time{}
	var spans []span
	var waits []wait
	var first, last trace.Time
	stw := map[string]time.Duration{}
	rangeStart := map[string]trace.Time{}
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		t := ev.Time()
		if first == 0 {
			first = t
		}
		last = t
		switch ev.Kind() {
		case trace.EventRangeBegin:
			rangeStart[ev.Range().Name] = t
		case trace.EventRangeEnd:
			n := ev.Range().Name
			if s, ok := rangeStart[n]; ok {
				stw[n] += t.Sub(s)
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if from == trace.GoNotExist && to == trace.GoRunnable {
				for fr := range st.Stack.Frames() {
					entry[g] = fr.Func // last frame: the entry function
				}
			}
			if from == trace.GoRunning && to == trace.GoSyscall {
				// A syscall keeps the P unless the runtime hands it off:
				// the episode goes on.
				if strings.Contains(stackText(ev.Stack()), "Checkpoint") || strings.Contains(stackText(st.Stack), "Checkpoint") {
					ckpt[g] = true
				}
				continue
			}
			if from == trace.GoSyscall && to == trace.GoRunning {
				if _, ok := running[g]; ok {
					continue
				}
			}
			if from == trace.GoRunning || from == trace.GoSyscall {
				if s, ok := running[g]; ok {
					stk := stackText(st.Stack)
					if stk == "" {
						stk = stackText(ev.Stack())
					}
					cat := category(entry[g], stk)
					if ckpt[g] {
						cat = "WAL checkpoint"
					}
					spans = append(spans, span{s, t, g, cat, stk})
					delete(running, g)
					delete(ckpt, g)
				}
			}
			if to == trace.GoRunning {
				running[g] = t
				if s, ok := runnable[g]; ok {
					waits = append(waits, wait{s, t, g})
					delete(runnable, g)
				}
			}
			if to == trace.GoRunnable {
				runnable[g] = t
			} else if to != trace.GoRunning {
				delete(runnable, g)
			}
		}
	}
	total := last.Sub(first)
	fmt.Printf("trace: %v, %d running spans, %d waits\n", total, len(spans), len(waits))

	// Waits: quantiles.
	ds := make([]time.Duration, len(waits))
	for i, w := range waits {
		ds[i] = w.end.Sub(w.start)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[int(p*float64(len(ds)-1))]
	}
	fmt.Printf("runnable waits: p50 %v p90 %v p99 %v p99.9 %v max %v\n", q(.5), q(.9), q(.99), q(.999), q(1))
	var nLong int
	for _, d := range ds {
		if d >= *threshold {
			nLong++
		}
	}
	fmt.Printf("waits >= %v: %d (%.2f%%)\n", *threshold, nLong, 100*float64(nLong)/float64(max(1, len(ds))))

	// Running time per category.
	busy := map[string]time.Duration{}
	var all time.Duration
	for _, s := range spans {
		busy[s.cat] += s.end.Sub(s.start)
		all += s.end.Sub(s.start)
	}
	fmt.Printf("\nrunning time by category (%v of %v = %.0f%%):\n", all, total, 100*all.Seconds()/total.Seconds())
	printMap(busy, all)

	// Span length distribution per category: p99, max.
	byCat := map[string][]time.Duration{}
	for _, s := range spans {
		byCat[s.cat] = append(byCat[s.cat], s.end.Sub(s.start))
	}
	fmt.Printf("\nspan lengths by category (n, p50, p99, max, spans >= 1ms, >= 3ms):\n")
	cats := keys(busy)
	for _, c := range cats {
		l := byCat[c]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		n1, n3 := 0, 0
		for _, d := range l {
			if d >= time.Millisecond {
				n1++
			}
			if d >= 3*time.Millisecond {
				n3++
			}
		}
		fmt.Printf("  %-28s %7d %9v %9v %9v %5d %5d\n", c, len(l), l[len(l)/2], l[int(.99*float64(len(l)-1))], l[len(l)-1], n1, n3)
	}

	// Long waits: who ran meanwhile.
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	blame := map[string]time.Duration{}
	var blamed time.Duration
	for _, w := range waits {
		d := w.end.Sub(w.start)
		if d < *threshold {
			continue
		}
		i := sort.Search(len(spans), func(i int) bool { return spans[i].end > w.start })
		var covered time.Duration
		for ; i < len(spans) && spans[i].start < w.end; i++ {
			s := spans[i]
			a, b := max(s.start, w.start), min(s.end, w.end)
			if b > a {
				blame[s.cat] += b.Sub(a)
				covered += b.Sub(a)
			}
		}
		blame["(no goroutine running)"] += d - covered
		blamed += d
	}
	fmt.Printf("\nwhat ran during waits >= %v (%v of waiting):\n", *threshold, blamed)
	printMap(blame, blamed)

	// Longest spans.
	sort.Slice(spans, func(i, j int) bool { return spans[i].end.Sub(spans[i].start) > spans[j].end.Sub(spans[j].start) })
	fmt.Printf("\nlongest running spans:\n")
	for _, s := range spans[:min(*top, len(spans))] {
		fmt.Printf("%v at +%v g%d %s\n%s\n", s.end.Sub(s.start), s.start.Sub(first).Round(time.Millisecond), s.g, s.cat, indent(s.stack))
	}
}

func stackText(s trace.Stack) string {
	var b strings.Builder
	n := 0
	for fr := range s.Frames() {
		if n < 14 {
			fmt.Fprintf(&b, "%s\n", fr.Func)
		}
		n++
	}
	return b.String()
}

func category(entry, stk string) string {
	has := func(s string) bool { return strings.Contains(stk, s) || strings.Contains(entry, s) }
	switch {
	case has("gcBgMarkWorker"):
		return "GC mark worker"
	case has("bgsweep") || has("bgscavenge"):
		return "GC sweep/scavenge"
	case has("runLedger") || has("commitBatch") || has("ledgerCore"):
		if strings.Contains(stk, "Gosched") {
			return "ledger (yield)"
		}
		return "ledger"
	case has("modernc.org/sqlite"):
		return "sqlite (other)"
	case has("logtext") || has("log/slog"):
		return "log"
	case has("net/http.(*persistConn)"):
		return "http client conn"
	case has("net/http.(*conn).serve"):
		return "http server conn"
	case has("runtime/trace") || has("runtime.traceAdvance") || has("pprof"):
		return "trace/pprof"
	}
	if entry != "" {
		return "entry " + entry
	}
	return "?"
}

func printMap(m map[string]time.Duration, all time.Duration) {
	for _, k := range keys(m) {
		fmt.Printf("  %-28s %12v %5.1f%%\n", k, m[k].Round(time.Microsecond), 100*m[k].Seconds()/all.Seconds())
	}
}

func keys(m map[string]time.Duration) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
	return ks
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
