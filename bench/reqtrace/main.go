//go:build bench

// Command reqtrace reads an execution trace of svcgw under bench/run.sh's
// constant-rate scenario (BENCH_SCENARIOS=rate BENCH_PROFILE=1
// BENCH_TRACE=1) and takes each non-streaming call apart as svcgw's one P
// saw it: from the moment the server connection's goroutine is woken by
// the network (the request arrived) to the write of its response, split
// into the goroutine's own running time, its waits for the P (and what
// held the P meanwhile), and its wait for the upstream (and, inside it, the
// waits for the P of net/http's writeLoop and readLoop that carry the
// upstream exchange). For the slowest calls (-slow, 1% by default) it says
// what their time went to, and for each wait, what ran on the P.
//
// A call's bytes reach svcgw some time before the runtime notices them: with
// one P the scheduler polls the network only when it has nothing else to
// run (and sysmon every 10 ms), so a call that arrives while the P is busy
// is seen when the P's run queue empties. That hidden time is not in the
// trace; "busy before" bounds it: how long the P had gone without polling
// (without an idle moment or a network wake-up) when the call was seen.
//
// Usage: go -C bench run -tags bench ./reqtrace [-slow 0.01] trace.out
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

// kind is what a goroutine is, from its entry function.
type kind int

const (
	kOther kind = iota
	kConn
	kReadLoop
	kWriteLoop
	kBgRead
	kLedger
	kGCWorker
	kRuntime
)

// span is a stretch during which one goroutine held the P (a syscall
// counts as holding it unless the runtime hands the P off).
type span struct {
	start, end trace.Time
	g          trace.GoID
	cat        string
}

type call struct {
	g                 trace.GoID
	start, end        trace.Time
	seen              bool          // started by a network wake-up
	busyBefore        time.Duration // the P's time without a poll before start
	run, runnable     time.Duration // the conn goroutine's
	upstream          time.Duration // waiting in roundTrip
	upWriteQ, upReadQ time.Duration // writeLoop's and readLoop's waits for the P inside it
	upUnseen          time.Duration // the P's time without a poll when the reply was seen
	other             time.Duration // other waits (body read, abortPendingRead, locks)
	assist            time.Duration // GC mark assist inside its running time
	inMark            bool          // a GC mark phase overlapped it
	tentative         bool          // begun at a read that may have found nothing
	waits             [][2]trace.Time
}

type gstate struct {
	k           kind
	runStart    trace.Time // when it started holding the P (0: not)
	runnableAt  trace.Time
	waitAt      trace.Time
	waitReason  string
	waitStack   string
	lastQ       [2]trace.Time // its last wait for the P
	cur         *call
	pendingRead trace.Time // a read syscall while idle, which may have found the next request
	assistAt    trace.Time
	entry       string
	netBusy     time.Duration // the P's time without a poll when it was last woken by the network
}

// The ledger's yields between a commit's statements (store.yieldCPU), and
// the goroutines the network poller woke while it was yielding.
var (
	yielding              trace.Time
	yields, yieldsWithNet int
	netWokenInYields      int
	yieldWake             int
)

func main() {
	slowFrac := flag.Float64("slow", 0.01, "fraction of calls, slowest first, to take apart")
	debugG := flag.Int64("g", 0, "print this goroutine's transitions (debugging)")
	flag.Parse()
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	r, err := trace.NewReader(f)
	if err != nil {
		fail(err)
	}

	gs := map[trace.GoID]*gstate{}
	get := func(g trace.GoID) *gstate {
		s := gs[g]
		if s == nil {
			s = &gstate{}
			gs[g] = s
		}
		return s
	}
	var spans []span
	var calls []*call
	var markStart trace.Time
	var marks [][2]trace.Time
	var lastPoll trace.Time // the last idle moment of the P or network wake-up
	pIdle := false
	var first, last trace.Time
	var idleTotal time.Duration
	var idleAt trace.Time
	var holder trace.GoID

	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
		}
		t := ev.Time()
		if first == 0 {
			first = t
		}
		last = t
		switch ev.Kind() {
		case trace.EventRangeBegin:
			rg := ev.Range()
			switch {
			case rg.Name == "GC concurrent mark phase":
				markStart = t
			case rg.Name == "GC mark assist" && rg.Scope.Kind == trace.ResourceGoroutine:
				get(rg.Scope.Goroutine()).assistAt = t
			}
		case trace.EventRangeEnd:
			rg := ev.Range()
			switch {
			case rg.Name == "GC concurrent mark phase" && markStart != 0:
				marks = append(marks, [2]trace.Time{markStart, t})
				markStart = 0
			case rg.Name == "GC mark assist" && rg.Scope.Kind == trace.ResourceGoroutine:
				s := get(rg.Scope.Goroutine())
				if s.assistAt != 0 && s.cur != nil {
					s.cur.assist += t.Sub(s.assistAt)
				}
				s.assistAt = 0
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind == trace.ResourceProc {
				_, to := st.Proc()
				if to == trace.ProcIdle {
					pIdle, idleAt = true, t
					if h := gs[holder]; h != nil && h.runStart != 0 {
						spans = append(spans, span{h.runStart, t, holder, catOf(h, trace.NoStack)})
						if h.cur != nil {
							h.cur.run += t.Sub(h.runStart)
						}
						h.runStart = 0
					}
				} else if pIdle && to == trace.ProcRunning {
					pIdle = false
					idleTotal += t.Sub(idleAt)
					lastPoll = t
				}
				continue
			}
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			s := get(g)
			from, to := st.Goroutine()
			if int64(g) == *debugG {
				fmt.Printf("%v %v->%v %q by g%d cur=%v\n%s", t.Sub(first), from, to, st.Reason, ev.Goroutine(), s.cur != nil, indent(stackText(st.Stack, 8)))
			}
			if s.k == kOther || s.k == kRuntime {
				// From its creation, or, for a goroutine older than the
				// trace, from the first stack it shows.
				if k := classify(st.Stack); k != kOther {
					s.k = k
				}
				for fr := range st.Stack.Frames() {
					s.entry = fr.Func
				}
			}
			// The P is held from Running until the goroutine stops running
			// or waits; a syscall keeps it until another goroutine runs
			// (the runtime handed the P off): with one P, one holder.
			if to == trace.GoRunning {
				if h := gs[holder]; holder != g && h != nil && h.runStart != 0 {
					spans = append(spans, span{h.runStart, t, holder, catOf(h, trace.NoStack)})
					if h.cur != nil {
						h.cur.run += t.Sub(h.runStart)
					}
					h.runStart = 0
				}
				holder = g
				if s.runStart == 0 {
					s.runStart = t
				}
			}
			stopped := (from == trace.GoRunning || from == trace.GoSyscall) && to != trace.GoRunning && to != trace.GoSyscall
			if stopped && s.runStart != 0 {
				spans = append(spans, span{s.runStart, t, g, catOf(s, st.Stack)})
				if s.cur != nil {
					s.cur.run += t.Sub(s.runStart)
				}
				s.runStart = 0
			}

			if s.k == kLedger {
				stk := stackText(st.Stack, 16)
				if from == trace.GoRunning && (to == trace.GoRunnable || to == trace.GoWaiting) && strings.Contains(stk, "yieldCPU") {
					yielding, yieldWake = t, 0
				} else if to == trace.GoRunning && yielding != 0 {
					yields++
					if yieldWake > 0 {
						yieldsWithNet++
						netWokenInYields += yieldWake
					}
					yielding = 0
				}
			}
			switch {
			case to == trace.GoRunnable && from != trace.GoRunnable:
				s.runnableAt = t
				if from == trace.GoWaiting {
					woke(s, g, t, ev, gs, &lastPoll, &calls, first)
				}
			case from == trace.GoRunnable && to == trace.GoRunning:
				if s.runnableAt != 0 {
					s.lastQ = [2]trace.Time{s.runnableAt, t}
					if s.cur != nil {
						s.cur.runnable += t.Sub(s.runnableAt)
						s.cur.waits = append(s.cur.waits, s.lastQ)
					}
				}
				s.runnableAt = 0
			case to == trace.GoWaiting:
				s.waitAt, s.waitReason, s.waitStack = t, st.Reason, stackText(st.Stack, 10)
				if s.k == kConn && s.cur != nil && s.cur.tentative && st.Reason == "network" {
					s.cur = nil // the read found nothing: the call starts at the wake-up
				}
				if s.cur != nil {
					s.cur.tentative = false
				}
			case from == trace.GoRunning && to == trace.GoSyscall && s.k == kConn:
				stk := stackText(st.Stack, 12)
				if s.cur == nil && strings.Contains(stk, "syscall.read") {
					s.pendingRead = t
				}
				if s.cur == nil && s.pendingRead != 0 && strings.Contains(stk, "syscall.read") {
					break
				}
				if s.cur != nil && strings.Contains(stk, "syscall.write") && s.cur.upstream > 0 {
					// The response's write: the call is over as far as
					// svcgw can tell.
					c := s.cur
					c.end = t
					if s.runStart != 0 {
						c.run += t.Sub(s.runStart)
						// the rest of this stretch is not the call's
						spans = append(spans, span{s.runStart, t, g, "http server conn"})
						s.runStart = t
					}
					calls = append(calls, c)
					s.cur = nil
				}
			case from == trace.GoSyscall && to == trace.GoRunning && s.k == kConn:
				if s.cur == nil && s.pendingRead != 0 {
					// A read that did not block: the next request was
					// already there; it starts at the read.
					s.cur = &call{g: g, start: s.pendingRead, tentative: true}
					s.pendingRead = 0
				}
			}
		}
	}
	total := last.Sub(first)
	for _, c := range calls {
		for _, m := range marks {
			if m[0] < c.end && m[1] > c.start {
				c.inMark = true
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })

	fmt.Printf("trace: %v, %d calls, P idle %.1f%%, %d GC mark phases (%v in all)\n",
		total.Round(time.Millisecond), len(calls), 100*idleTotal.Seconds()/total.Seconds(), len(marks), sumRanges(marks).Round(time.Microsecond))
	fmt.Printf("the ledger's yields between statements: %d, %d of them with goroutines woken by the network meanwhile (%d goroutines)\n", yields, yieldsWithNet, netWokenInYields)
	if len(calls) == 0 {
		return
	}
	e2e := func(c *call) time.Duration { return c.end.Sub(c.start) }
	sort.Slice(calls, func(i, j int) bool { return e2e(calls[i]) < e2e(calls[j]) })
	q := func(p float64) time.Duration { return e2e(calls[int(p*float64(len(calls)-1))]) }
	fmt.Printf("a call in svcgw (network wake-up to the response's write): p50 %v p90 %v p99 %v p99.9 %v max %v\n",
		q(.5), q(.9), q(.99), q(.999), q(1))
	bb := make([]time.Duration, 0, len(calls))
	for _, c := range calls {
		if c.seen {
			bb = append(bb, c.busyBefore)
		}
	}
	sort.Slice(bb, func(i, j int) bool { return bb[i] < bb[j] })
	if len(bb) > 0 {
		qb := func(p float64) time.Duration { return bb[int(p*float64(len(bb)-1))] }
		fmt.Printf("busy before (the P's time without a poll when a call was seen): p50 %v p90 %v p99 %v max %v\n", qb(.5), qb(.9), qb(.99), qb(1))
	}

	n := max(1, int(*slowFrac*float64(len(calls))))
	slow := calls[len(calls)-n:]
	fast := calls[:len(calls)/2]
	for _, c := range slow[len(slow)-min(3, len(slow)):] {
		fmt.Printf("slow call: g%d at +%v, %v\n", c.g, c.start.Sub(first), e2e(c))
	}
	fmt.Printf("\nthe slowest %d calls (%.1f%%, from %v) against the faster half, means:\n", n, 100*float64(n)/float64(len(calls)), e2e(slow[0]))
	row := func(name string, f func(*call) time.Duration) {
		fmt.Printf("  %-44s %10v %10v\n", name, mean(slow, f), mean(fast, f))
	}
	fmt.Printf("  %-44s %10s %10s\n", "", "slowest", "faster half")
	row("in svcgw", e2e)
	row("  running (the conn goroutine)", func(c *call) time.Duration { return c.run })
	row("    of which GC mark assist", func(c *call) time.Duration { return c.assist })
	row("  waiting for the P (the conn goroutine)", func(c *call) time.Duration { return c.runnable })
	row("  waiting for the upstream", func(c *call) time.Duration { return c.upstream })
	row("    of which writeLoop waits for the P", func(c *call) time.Duration { return c.upWriteQ })
	row("    of which readLoop waits for the P", func(c *call) time.Duration { return c.upReadQ })
	row("    of which the reply unseen (bound)", func(c *call) time.Duration { return c.upUnseen })
	row("  other waits (body, locks)", func(c *call) time.Duration { return c.other })
	row("busy before (bound on time unseen)", func(c *call) time.Duration { return c.busyBefore })
	frac := func(cs []*call, p func(*call) bool) float64 {
		k := 0
		for _, c := range cs {
			if p(c) {
				k++
			}
		}
		return 100 * float64(k) / float64(len(cs))
	}
	fmt.Printf("  %-44s %9.0f%% %9.0f%%\n", "overlapping a GC mark phase", frac(slow, func(c *call) bool { return c.inMark }), frac(fast, func(c *call) bool { return c.inMark }))
	fmt.Printf("  (GC mark phases cover %.2f%% of the trace)\n", 100*sumRanges(marks).Seconds()/total.Seconds())

	// What held the P while the slow calls (and their upstream exchange)
	// waited for it, and during the time before they were seen.
	var ws [][2]trace.Time
	skip := map[int]trace.GoID{}
	for _, c := range slow {
		for _, w := range c.waits {
			skip[len(ws)] = c.g
			ws = append(ws, w)
		}
		if c.seen && c.busyBefore > 0 {
			skip[len(ws)] = c.g
			ws = append(ws, [2]trace.Time{c.start - trace.Time(c.busyBefore), c.start})
		}
	}
	blame, blamed := attribute(spans, ws, skip)
	fmt.Printf("\nwhat held the P while the slowest calls (their conn, writeLoop and readLoop goroutines) waited for it, and before they were seen (%v in all, %v a call):\n", blamed.Round(time.Microsecond), (blamed / time.Duration(n)).Round(time.Microsecond))
	printBlame(blame, blamed, n)

	// The time every call went unseen: what the P did instead of polling.
	ws, skip = ws[:0], map[int]trace.GoID{}
	seen := 0
	for _, c := range calls {
		if c.seen && c.busyBefore > 0 {
			skip[len(ws)] = c.g
			ws = append(ws, [2]trace.Time{c.start - trace.Time(c.busyBefore), c.start})
			seen++
		}
	}
	blame, blamed = attribute(spans, ws, skip)
	fmt.Printf("\nwhat held the P before each call was seen, all %d calls seen by a network wake-up (%v in all, %v a call):\n", seen, blamed.Round(time.Microsecond), (blamed / time.Duration(max(1, seen))).Round(time.Microsecond))
	printBlame(blame, blamed, seen)
	for _, lim := range []time.Duration{250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond} {
		k, kl := 0, 0
		for i, w := range ws {
			if w[1].Sub(w[0]) >= lim {
				k++
				if ledgerIn(spans, w, skip[i]) {
					kl++
				}
			}
		}
		fmt.Printf("  calls seen after >= %v without a poll: %d (%.2f%%), %d of them with the ledger running meanwhile\n", lim, k, 100*float64(k)/float64(max(1, len(calls))), kl)
	}

	// The P's time by category, over the whole trace.
	busy := map[string]time.Duration{}
	var all time.Duration
	for _, s := range spans {
		busy[s.cat] += s.end.Sub(s.start)
		all += s.end.Sub(s.start)
	}
	fmt.Printf("\nthe P's time by what held it (%v, %.0f%% of the trace):\n", all.Round(time.Millisecond), 100*all.Seconds()/total.Seconds())
	for _, k := range keys(busy) {
		fmt.Printf("  %-40s %12v %5.1f%%\n", k, busy[k].Round(time.Microsecond), 100*busy[k].Seconds()/all.Seconds())
	}
}

// woke handles a goroutine's wake-up from a wait: a server connection's
// next request, or the end of a call's wait for its upstream.
func woke(s *gstate, g trace.GoID, t trace.Time, ev trace.Event, gs map[trace.GoID]*gstate, lastPoll *trace.Time, calls *[]*call, first trace.Time) {
	byNet := ev.Goroutine() == trace.NoGoroutine && s.waitReason == "network"
	if byNet {
		s.netBusy = 0
		if *lastPoll != 0 && *lastPoll < t {
			s.netBusy = t.Sub(*lastPoll)
		}
		defer func() { *lastPoll = t }()
		if yielding != 0 && s.k != kLedger {
			yieldWake++
		}
	}
	if s.k == kConn && s.cur == nil && s.waitReason == "network" &&
		(strings.Contains(s.waitStack, "Peek") || strings.Contains(s.waitStack, "ReadSlice") || strings.Contains(s.waitStack, "readRequest")) {
		c := &call{g: g, start: t, seen: true}
		if *lastPoll != 0 && *lastPoll < t {
			c.busyBefore = t.Sub(*lastPoll)
		}
		s.cur = c
		s.pendingRead = 0
		return
	}
	if s.k == kConn && s.cur != nil && s.waitAt != 0 {
		d := t.Sub(s.waitAt)
		if strings.Contains(s.waitStack, "roundTrip") {
			s.cur.upstream += d
			// Who woke it: the readLoop that read the reply. Its last wait
			// for the P inside this wait is on the call's path, and so is
			// the writeLoop's that wrote the request.
			if w := gs[ev.Goroutine()]; w != nil && w.k == kReadLoop && w.lastQ[0] >= s.waitAt {
				s.cur.upReadQ += w.lastQ[1].Sub(w.lastQ[0])
				s.cur.waits = append(s.cur.waits, w.lastQ)
				s.cur.upUnseen += w.netBusy
				if w.netBusy > 0 {
					s.cur.waits = append(s.cur.waits, [2]trace.Time{w.lastQ[0] - trace.Time(w.netBusy), w.lastQ[0]})
				}
			}
			for _, w := range gs {
				// The conn readied its writeLoop just before it waited.
				if w.k == kWriteLoop && w.lastQ[0] <= s.waitAt && w.lastQ[0] >= s.waitAt-trace.Time(20*time.Microsecond) {
					s.cur.upWriteQ += w.lastQ[1].Sub(w.lastQ[0])
					s.cur.waits = append(s.cur.waits, w.lastQ)
					break
				}
			}
		} else {
			s.cur.other += d
		}
	}
}

func classify(stk trace.Stack) kind {
	var entry string
	all := stackText(stk, 64)
	for fr := range stk.Frames() {
		entry = fr.Func
	}
	switch {
	case strings.Contains(entry, "net/http.(*conn).serve"):
		return kConn
	case strings.Contains(entry, "persistConn).readLoop"):
		return kReadLoop
	case strings.Contains(entry, "persistConn).writeLoop"):
		return kWriteLoop
	case strings.Contains(entry, "backgroundRead"):
		return kBgRead
	case strings.Contains(all, "runLedger") || strings.Contains(all, "ledger"):
		return kLedger
	case strings.Contains(all, "gcBgMarkWorker"):
		return kGCWorker
	case strings.HasPrefix(entry, "runtime."):
		return kRuntime
	}
	return kOther
}

func catOf(s *gstate, stk trace.Stack) string {
	switch s.k {
	case kConn:
		if s.cur != nil {
			return "http server conn (another call)"
		}
		return "http server conn"
	case kReadLoop:
		return "http client readLoop"
	case kWriteLoop:
		return "http client writeLoop"
	case kBgRead:
		return "http server backgroundRead"
	case kLedger:
		return "ledger"
	case kGCWorker:
		return "GC mark worker"
	}
	txt := stackText(stk, 32)
	switch {
	case strings.Contains(txt, "gcBgMarkWorker"):
		return "GC mark worker"
	case strings.Contains(txt, "bgsweep") || strings.Contains(txt, "bgscavenge"):
		return "GC sweep/scavenge"
	case strings.Contains(txt, "ledger") || strings.Contains(txt, "modernc.org/sqlite"):
		return "ledger"
	case strings.Contains(txt, "runtime/trace") || strings.Contains(txt, "traceAdvance") || strings.Contains(txt, "pprof"):
		return "trace/pprof"
	case strings.Contains(txt, "Accept"):
		return "accept"
	}
	if s.k == kRuntime {
		return "runtime (other)"
	}
	if s.entry != "" {
		return "other: " + s.entry
	}
	return "other"
}

func stackText(s trace.Stack, n int) string {
	var b strings.Builder
	i := 0
	for fr := range s.Frames() {
		if i == n {
			break
		}
		b.WriteString(fr.Func)
		b.WriteByte('\n')
		i++
	}
	return b.String()
}

func mean(cs []*call, f func(*call) time.Duration) time.Duration {
	var s time.Duration
	for _, c := range cs {
		s += f(c)
	}
	return (s / time.Duration(max(1, len(cs)))).Round(time.Microsecond)
}

func sumRanges(rs [][2]trace.Time) time.Duration {
	var s time.Duration
	for _, r := range rs {
		s += r[1].Sub(r[0])
	}
	return s
}

func keys(m map[string]time.Duration) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
	return ks
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "reqtrace:", err)
	os.Exit(1)
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// attribute sums, over the intervals ws, the time each category of
// goroutine held the P (not counting the interval's own goroutine).
func attribute(spans []span, ws [][2]trace.Time, self map[int]trace.GoID) (map[string]time.Duration, time.Duration) {
	blame := map[string]time.Duration{}
	var all time.Duration
	for i, w := range ws {
		all += w[1].Sub(w[0])
		covered := time.Duration(0)
		j := sort.Search(len(spans), func(j int) bool { return spans[j].start >= w[0] })
		for j = max(0, j-64); j < len(spans) && spans[j].start < w[1]; j++ {
			s := spans[j]
			if s.g == self[i] {
				continue
			}
			a, b := max(s.start, w[0]), min(s.end, w[1])
			if b > a {
				blame[s.cat] += b.Sub(a)
				covered += b.Sub(a)
			}
		}
		if d := w[1].Sub(w[0]) - covered; d > 0 {
			blame["(no goroutine: scheduler, STW, kernel)"] += d
		}
	}
	return blame, all
}

func ledgerIn(spans []span, w [2]trace.Time, self trace.GoID) bool {
	j := sort.Search(len(spans), func(j int) bool { return spans[j].start >= w[0] })
	for j = max(0, j-64); j < len(spans) && spans[j].start < w[1]; j++ {
		if spans[j].cat == "ledger" && spans[j].end > w[0] {
			return true
		}
	}
	return false
}

func printBlame(blame map[string]time.Duration, all time.Duration, n int) {
	for _, k := range keys(blame) {
		fmt.Printf("  %-40s %12v %5.1f%%  %v a call\n", k, blame[k].Round(time.Microsecond), 100*blame[k].Seconds()/all.Seconds(), (blame[k] / time.Duration(max(1, n))).Round(time.Microsecond))
	}
}
