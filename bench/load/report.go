//go:build bench

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The targets the report checks: issue 19's four figures, each against
// the floor measured in the same run, and what is left of issue 8's.
const (
	targetThroughputRatio = 0.8  // svcgw max req/s over the bare proxy's, either driver
	targetStreamsRatio    = 0.8  // svcgw streams/s over the bare proxy's
	targetEmbedRatio      = 0.8  // svcgw embeddings calls/s over the bare proxy's (issue 36)
	targetHoldRSSRatio    = 1.25 // svcgw peak RSS over the bare proxy's, 1,000 open streams
	targetAddedP99        = 1.5  // ms over direct at 2,000 req/s: the median of five runs
	targetAddedP99Max     = 2.5  // ms, no run above
	targetAddedP50        = 0.3  // ms over direct at the constant rate (issue 8)
	targetAddedTTFT       = 0.5  // ms, streaming p50 (issue 8)
	targetHoldStreams     = 1000
)

// targets are the columns of the tables: the two references, the JSON
// floors when measured (bench/floor: floor, and floor-copy, its
// ReverseProxy mode) and each svcgw measured (svcgw-h2c: the same svcgw
// reaching the mock over h2c), set from the results present.
var targets = []string{"direct", "proxy", "svcgw"}

// floorTarget is bench/floor in its JSON mode: svcgw's figures are also
// compared with it.
const floorTarget = "floor"

// svcgwTargets are the svcgw columns.
func svcgwTargets() []string { return targetsWith("svcgw") }

// floorTargets are bench/floor's columns.
func floorTargets() []string { return targetsWith("floor") }

func targetsWith(prefix string) []string {
	var ts []string
	for _, t := range targets {
		if strings.HasPrefix(t, prefix) {
			ts = append(ts, t)
		}
	}
	return ts
}

// sortTargets puts the columns in order: direct, the proxy, the floors
// (floor-copy, the proxy behind a key check, before floor), then the
// svcgws in the order found.
func sortTargets() {
	rank := func(t string) int {
		switch {
		case t == "direct":
			return 0
		case t == "proxy":
			return 1
		case t == "floor-copy":
			return 2
		case strings.HasPrefix(t, "floor"):
			return 3
		}
		return 4
	}
	slices.SortStableFunc(targets, func(a, b string) int { return rank(a) - rank(b) })
}

// reportCmd prints the side-by-side tables of a run's result files and
// checks the targets. It fails only when it cannot read them.
func reportCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	genCounts := map[string]int64{} // by svcgw target
	fs.Func("gen-count", "[TARGET=]N: generation records found in an svcgw's database after the run (TARGET defaults to svcgw; repeatable)", func(v string) error {
		t, v := cutTarget(v)
		var n int64
		_, err := fmt.Sscan(v, &n)
		genCounts[t] = n
		return err
	})
	fs.Func("usage-json", "[TARGET=]FILE: output of 'svcgw usage --account A --json' after the run; its total.requests is that svcgw's generation count (repeatable)", func(v string) error {
		t, file := cutTarget(v)
		n, err := usageRequests(file)
		genCounts[t] = n
		return err
	})
	dbLocked := fs.Int64("db-locked", -1, `"database is locked" lines in the svcgw logs (-1: not checked)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	res := map[string]map[string]*Result{}
	for _, f := range fs.Args() {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r Result
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if res[r.Scenario] == nil {
			res[r.Scenario] = map[string]*Result{}
		}
		res[r.Scenario][r.Target] = &r
		// Columns: the references and each svcgw measured; the metrics
		// comparison's svcgw-metrics and repeats (svcgw@2, …) have a
		// table of their own (metricsTable), and so have the tracing
		// comparison's (tracingTable).
		if !slices.Contains(targets, r.Target) && r.Target != metricsTarget && r.Target != tracingTarget && !strings.Contains(r.Target, "@") {
			targets = append(targets, r.Target)
		}
	}
	sortTargets()
	rp := &report{w: out, res: res}
	rp.tables()
	rp.embeddingsTable()
	rp.metricsTable()
	rp.tracingTable()
	rp.checks(genCounts, *dbLocked)
	rp.floorTable()
	return nil
}

// median is the median of get over the results of scenario from target
// and its repeats (target@2, target@3, …), and how many there were.
func (rp *report) median(scenario, target string, get func(*Result) float64) (float64, int) {
	var vs []float64
	for name, r := range rp.res[scenario] {
		if name == target || strings.HasPrefix(name, target+"@") {
			vs = append(vs, get(r))
		}
	}
	if len(vs) == 0 {
		return 0, 0
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2, n
	}
	return vs[len(vs)/2], len(vs)
}

// metricsTarget is the name run.sh gives svcgw serving with its admin
// listener on, so recording Prometheus metrics (BENCH_METRICS=1).
const metricsTarget = "svcgw-metrics"

// metricsTable compares svcgw with and without metrics, scenario by
// scenario: what recording them costs a call (issue 16: within
// run-to-run noise, at most 2% of CPU per call).
func (rp *report) metricsTable() {
	type fig struct {
		label, scenario string
		get             func(*Result) float64
		format          func(float64) string
		cpu             bool // compared as a share of svcgw's
	}
	ttftP50 := func(r *Result) float64 {
		if r.TTFT == nil {
			return 0
		}
		return r.TTFT.P50
	}
	figs := []fig{
		{"(a) req/s at saturation", "max", func(r *Result) float64 { return r.Throughput }, f0, false},
		{"(a) CPU per call (µs)", "max", func(r *Result) float64 { return r.CPUPerCallMicros }, f1, true},
		{"(b) p50 at 2,000 req/s (ms)", "rate", func(r *Result) float64 { return r.Latency.P50 }, f3, false},
		{"(b) p99 at 2,000 req/s (ms)", "rate", func(r *Result) float64 { return r.Latency.P99 }, f3, false},
		{"(b) CPU per call at 2,000 req/s (µs)", "rate", func(r *Result) float64 { return r.CPUPerCallMicros }, f1, true},
		{"(c) streams/s at saturation", "stream", func(r *Result) float64 { return r.Throughput }, f0, false},
		{"(c) CPU per stream (µs)", "stream", func(r *Result) float64 { return r.CPUPerCallMicros }, f1, true},
		{"(c) TTFT p50 at 500 streams/s (ms)", "streamrate", ttftP50, f3, false},
		{"(c) CPU per stream at 500 streams/s (µs)", "streamrate", func(r *Result) float64 { return r.CPUPerCallMicros }, f1, true},
	}
	header := false
	for _, f := range figs {
		// Each side's figure is the median of its runs: the first pair,
		// and the repeats named svcgw@k and svcgw-metrics@k.
		a, na := rp.median(f.scenario, "svcgw", f.get)
		b, nb := rp.median(f.scenario, metricsTarget, f.get)
		if na == 0 || nb == 0 {
			continue
		}
		if !header {
			header = true
			fmt.Fprintf(rp.w, "\n### (f) the cost of metrics: svcgw without and with its admin listener (Prometheus scraping it)\n\n")
			fmt.Fprintf(rp.w, "median of %d runs each, alternating which goes first\n\n", min(na, nb))
			fmt.Fprintln(rp.w, "| | svcgw | svcgw, metrics on | difference |\n|---|---:|---:|---:|")
		}
		diff := f.format(b - a)
		if b-a >= 0 {
			diff = "+" + diff
		}
		if a != 0 {
			diff += fmt.Sprintf(" (%+.1f%%)", (b-a)/a*100)
		}
		fmt.Fprintf(rp.w, "| %s | %s | %s | %s |\n", f.label, f.format(a), f.format(b), diff)
	}
}

// tracingTarget is the name run.sh gives svcgw tracing every call into a
// real collector (BENCH_TRACING=1); its repeats are svcgw-traced@tK, and
// the runs of svcgw without tracing beside them svcgw@tK.
const tracingTarget = "svcgw-traced"

// Issue 38's targets, tracing every call against tracing off at 2,000
// req/s: CPU per call at most 3% more, p99 at most 0.2 ms more.
const (
	targetTracingCPUPct = 3.0
	targetTracingAddP99 = 0.2
)

// tracingTable compares svcgw without and with tracing, pair by pair
// (run k of each, one right after the other, alternating which goes
// first), for each scenario the comparison ran: what tracing costs a
// call, against issue 38's targets on the medians of the differences.
func (rp *report) tracingTable() {
	for _, scenario := range []string{"rate", "max", "stream", "streamrate"} {
		on := rp.res[scenario][tracingTarget]
		off := rp.res[scenario]["svcgw"]
		if on == nil || off == nil {
			continue
		}
		type pair struct{ off, on *Result }
		pairs := []pair{{off, on}}
		for k := 2; ; k++ {
			a, b := rp.res[scenario][fmt.Sprintf("svcgw@t%d", k)], rp.res[scenario][fmt.Sprintf("%s@t%d", tracingTarget, k)]
			if a == nil || b == nil {
				break
			}
			pairs = append(pairs, pair{a, b})
		}
		fmt.Fprintf(rp.w, "\n### (g) the cost of tracing, %s: svcgw without and with every call traced over OTLP/gRPC (where to: the header's (g))\n\n", scenario)
		fmt.Fprintf(rp.w, "%d pairs of runs, one right after the other, alternating which goes first\n\n", len(pairs))
		fmt.Fprintln(rp.w, "| run | off: req/s | off: p50 | off: p99 | off: CPU µs/call | on: req/s | on: p50 | on: p99 | on: CPU µs/call | added p99 (ms) | CPU per call |")
		fmt.Fprintln(rp.w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		var addP99, cpuPct []float64
		for i, p := range pairs {
			d := p.on.Latency.P99 - p.off.Latency.P99
			c := 0.0
			if p.off.CPUPerCallMicros != 0 {
				c = (p.on.CPUPerCallMicros - p.off.CPUPerCallMicros) / p.off.CPUPerCallMicros * 100
			}
			addP99, cpuPct = append(addP99, d), append(cpuPct, c)
			fmt.Fprintf(rp.w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %+.3f | %+.1f%% |\n", i+1,
				f0(p.off.Throughput), f3(p.off.Latency.P50), f3(p.off.Latency.P99), f1(p.off.CPUPerCallMicros),
				f0(p.on.Throughput), f3(p.on.Latency.P50), f3(p.on.Latency.P99), f1(p.on.CPUPerCallMicros), d, c)
		}
		mp, mc := medianOf(addP99), medianOf(cpuPct)
		fmt.Fprintf(rp.w, "| median | | | | | | | | | %+.3f | %+.1f%% |\n\n", mp, mc)
		if scenario == "rate" {
			verdict := func(ok bool) string {
				if ok {
					return "PASS"
				}
				return "FAIL"
			}
			fmt.Fprintf(rp.w, "- issue 38, CPU per call at most +%.0f%% with every call traced: median %+.1f%% · %s\n", targetTracingCPUPct, mc, verdict(mc <= targetTracingCPUPct))
			fmt.Fprintf(rp.w, "- issue 38, added p99 at most +%.1f ms: median %+.3f ms · %s\n", targetTracingAddP99, mp, verdict(mp <= targetTracingAddP99))
		}
	}
}

func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// cutTarget splits TARGET=VALUE; a bare VALUE is svcgw's.
func cutTarget(v string) (target, value string) {
	if t, val, ok := strings.Cut(v, "="); ok && strings.HasPrefix(t, "svcgw") {
		return t, val
	}
	return "svcgw", v
}

// usageRequests reads total.requests from 'svcgw usage --json' output.
func usageRequests(file string) (int64, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var u struct {
		Total *struct {
			Requests *int64 `json:"requests"`
		} `json:"total"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if u.Total == nil || u.Total.Requests == nil {
		return 0, fmt.Errorf("%s: no total.requests", file)
	}
	return *u.Total.Requests, nil
}

type report struct {
	w   io.Writer
	res map[string]map[string]*Result
}

func (rp *report) get(scenario, target string) *Result { return rp.res[scenario][target] }

// compare is a table's last column for one subject s, a floor or an
// svcgw: d, p and f are direct's, the proxy's and the JSON floor's results
// in the same scenario (nil when not measured); first says whether s is
// the row's first subject.
type compare func(d, p, f, s *Result, first bool) string

// row prints one table row: a label, one cell per target, and a last
// column computed from direct's, the proxy's, the floors' and each
// svcgw's results (ratio or added latency), joined.
func (rp *report) row(label, scenario string, cell func(*Result) string, last compare) {
	cells := []string{label}
	for _, t := range targets {
		r := rp.get(scenario, t)
		if r == nil {
			cells = append(cells, "–")
			continue
		}
		cells = append(cells, cell(r))
	}
	l := ""
	if last != nil {
		var parts []string
		d, p, f := rp.get(scenario, "direct"), rp.get(scenario, "proxy"), rp.get(scenario, floorTarget)
		for i, t := range append(floorTargets(), svcgwTargets()...) {
			if v := last(d, p, f, rp.get(scenario, t), i == 0); v != "" {
				parts = append(parts, v)
			}
		}
		l = strings.Join(parts, ", ")
	}
	fmt.Fprintf(rp.w, "| %s | %s |\n", strings.Join(cells, " | "), l)
}

// detail is the load shape of a scenario, as its results describe it.
func (rp *report) detail(scenario string) string {
	for _, t := range targets {
		if r := rp.get(scenario, t); r != nil && r.Detail != "" {
			return r.Detail
		}
	}
	return "not run"
}

func (rp *report) header(title, scenario, last string) bool {
	if len(rp.res[scenario]) == 0 {
		return false
	}
	fmt.Fprintf(rp.w, "\n### %s\n\n%s\n\n", title, rp.detail(scenario))
	rp.columns(last)
	return true
}

// columns prints a table's head: one column per target, then last.
func (rp *report) columns(last string) {
	fmt.Fprintf(rp.w, "| | %s | %s |\n|---|%s---:|\n", strings.Join(targets, " | "), last, strings.Repeat("---:|", len(targets)))
}

// ratio is "svcgw/proxy 0.85×" for one figure of s and p, and for an
// svcgw, when the JSON floor was measured, "svcgw/floor 0.90×" after it.
func ratio(get func(*Result) float64) compare {
	return func(_, p, f, s *Result, _ bool) string {
		if s == nil {
			return ""
		}
		var parts []string
		if p != nil && get(p) != 0 {
			parts = append(parts, fmt.Sprintf("%s/proxy %.2f×", s.Target, get(s)/get(p)))
		}
		if f != nil && get(f) != 0 && strings.HasPrefix(s.Target, "svcgw") {
			parts = append(parts, fmt.Sprintf("%s/floor %.2f×", s.Target, get(s)/get(f)))
		}
		return strings.Join(parts, ", ")
	}
}

// ratioColumn is the head of a ratio column.
func ratioColumn() string {
	if slices.Contains(targets, floorTarget) {
		return "svcgw, floor / proxy; svcgw / floor"
	}
	return "svcgw / proxy"
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f3(v float64) string { return fmt.Sprintf("%.3f", v) }
func pct(v float64) string {
	if v == 100 {
		return "100%"
	}
	return fmt.Sprintf("%.2f%%", v)
}

// added prints "proxy +x, svcgw +y" for one latency figure (the proxy's
// next to the row's first subject only).
func added(get func(*Result) float64) compare {
	return func(d, p, _, s *Result, first bool) string {
		if d == nil {
			return ""
		}
		var parts []string
		if p != nil && first {
			parts = append(parts, fmt.Sprintf("proxy %+.3f", get(p)-get(d)))
		}
		if s != nil {
			parts = append(parts, fmt.Sprintf("%s %+.3f", s.Target, get(s)-get(d)))
		}
		return strings.Join(parts, ", ")
	}
}

func (rp *report) commonRows(scenario string) {
	rp.row("CPU per call (µs)", scenario, func(r *Result) string { return f1(r.CPUPerCallMicros) }, ratio(func(r *Result) float64 { return r.CPUPerCallMicros }))
	rp.row("peak RSS (MiB)", scenario, func(r *Result) string { return f1(r.PeakRSSMiB) }, nil)
	rp.othersRow(scenario, "")
}

// othersRow shows how busy the target's core was: the target's own share,
// and what other processes took from it meanwhile.
func (rp *report) othersRow(scenario, when string) {
	rp.row("its core: target / others (%)"+when, scenario, func(r *Result) string {
		if r.TargetCore < 0 || r.CoreBusyPct == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f / %.0f", r.TargetCPUPct, r.OthersOnCorePct)
	}, nil)
}

func (rp *report) tables() {
	for _, sc := range []struct{ scenario, driver string }{{"max", "bench/load's closed-loop driver"}, {"max-vegeta", "vegeta"}} {
		if rp.header("(a) maximum throughput, non-streaming chat completions, driven by "+sc.driver, sc.scenario, ratioColumn()) {
			rp.row("req/s", sc.scenario, func(r *Result) string { return f0(r.Throughput) }, ratio(func(r *Result) float64 { return r.Throughput }))
			rp.row("success", sc.scenario, func(r *Result) string { return pct(r.SuccessPct) }, nil)
			rp.row("p50 / p90 / p99 (ms)", sc.scenario, func(r *Result) string {
				return f3(r.Latency.P50) + " / " + f3(r.Latency.P90) + " / " + f3(r.Latency.P99)
			}, nil)
			rp.commonRows(sc.scenario)
		}
	}
	if rp.header("(b) constant rate, non-streaming chat completions", "rate", "added over direct (ms)") {
		rp.row("success", "rate", func(r *Result) string { return pct(r.SuccessPct) }, nil)
		rp.row("achieved req/s", "rate", func(r *Result) string { return f0(r.Throughput) }, nil)
		rp.row("p50 (ms)", "rate", func(r *Result) string { return f3(r.Latency.P50) }, added(func(r *Result) float64 { return r.Latency.P50 }))
		rp.row("p90 (ms)", "rate", func(r *Result) string { return f3(r.Latency.P90) }, added(func(r *Result) float64 { return r.Latency.P90 }))
		rp.row("p99 (ms)", "rate", func(r *Result) string { return f3(r.Latency.P99) }, added(func(r *Result) float64 { return r.Latency.P99 }))
		rp.row("max (ms)", "rate", func(r *Result) string { return f3(r.Latency.Max) }, nil)
		rp.commonRows("rate")
	}
	if len(rp.res["stream"])+len(rp.res["streamrate"]) > 0 {
		fmt.Fprintf(rp.w, "\n### (c) streaming chat completions\n\nstreams/s: %s; time to first token: %s\n\n", rp.detail("stream"), rp.detail("streamrate"))
		rp.columns("svcgw vs direct / proxy")
		rp.row("streams/s (closed loop)", "stream", func(r *Result) string { return f0(r.Throughput) }, ratio(func(r *Result) float64 { return r.Throughput }))
		rp.row("success (closed loop)", "stream", func(r *Result) string { return pct(r.SuccessPct) }, nil)
		rp.row("CPU per stream (µs)", "stream", func(r *Result) string { return f1(r.CPUPerCallMicros) }, ratio(func(r *Result) float64 { return r.CPUPerCallMicros }))
		ttft := func(q func(*Quantiles) float64) func(*Result) float64 {
			return func(r *Result) float64 {
				if r.TTFT == nil {
					return 0
				}
				return q(r.TTFT)
			}
		}
		p50 := ttft(func(q *Quantiles) float64 { return q.P50 })
		p99 := ttft(func(q *Quantiles) float64 { return q.P99 })
		rp.row("success (constant rate)", "streamrate", func(r *Result) string { return pct(r.SuccessPct) }, nil)
		rp.row("TTFT p50 (ms)", "streamrate", func(r *Result) string { return f3(p50(r)) }, added(p50))
		rp.row("TTFT p99 (ms)", "streamrate", func(r *Result) string { return f3(p99(r)) }, added(p99))
		rp.row("whole stream p50 / p99 (ms)", "streamrate", func(r *Result) string { return f3(r.Latency.P50) + " / " + f3(r.Latency.P99) }, nil)
		rp.row("CPU per stream at that rate (µs)", "streamrate", func(r *Result) string { return f1(r.CPUPerCallMicros) }, nil)
		rp.row("peak RSS (MiB)", "stream", func(r *Result) string { return f1(r.PeakRSSMiB) }, nil)
		rp.othersRow("stream", ", closed loop")
		rp.othersRow("streamrate", ", constant rate")
	}
	if rp.header("(d) concurrent open streams (slow upstream)", "hold", ratioColumn()) {
		rp.row("streams completed", "hold", func(r *Result) string { return fmt.Sprintf("%d / %d", r.OK, r.Requests) }, nil)
		rp.row("open at once (max)", "hold", func(r *Result) string { return fmt.Sprint(r.MaxOpen) }, nil)
		rp.row("TTFT p50 / p99 (ms)", "hold", func(r *Result) string {
			if r.TTFT == nil {
				return "–"
			}
			return f3(r.TTFT.P50) + " / " + f3(r.TTFT.P99)
		}, nil)
		rp.row("peak RSS, VmHWM (MiB)", "hold", func(r *Result) string { return f1(r.PeakRSSMiB) }, ratio(func(r *Result) float64 { return r.PeakRSSMiB }))
		rp.row("max sampled VmRSS (MiB)", "hold", func(r *Result) string { return f1(r.MaxSampledRSSMiB) }, nil)
		rp.row("… of it anonymous / file-backed (MiB)", "hold", func(r *Result) string {
			if r.MaxSampledAnonMiB == 0 {
				return "–"
			}
			return f1(r.MaxSampledAnonMiB) + " / " + f1(r.MaxSampledFileMiB)
		}, nil)
		rp.row("VmRSS before the streams (MiB)", "hold", func(r *Result) string { return f1(r.StartRSSMiB) }, nil)
		rp.row("RSS per open stream (KiB): (max sampled − before) / most open", "hold", func(r *Result) string {
			return f1(perStreamKiB(r))
		}, ratio(perStreamKiB))
		rp.row("CPU per stream (µs)", "hold", func(r *Result) string { return f1(r.CPUPerCallMicros) }, nil)
		rp.othersRow("hold", "")
	}
	var surf []*Result
	for _, s := range []string{"max", "messages", "gencontent"} {
		if r := rp.get(s, "svcgw"); r != nil {
			surf = append(surf, r)
		}
	}
	if len(surf) > 1 {
		fmt.Fprintf(rp.w, "\n### (e) surfaces through svcgw, all served by the OpenAI-protocol mock\n\n%s\n\n", surf[len(surf)-1].Detail)
		fmt.Fprintln(rp.w, "| surface | req/s | success | p50 / p99 (ms) | CPU per call (µs) | peak RSS (MiB) |\n|---|---:|---:|---:|---:|---:|")
		for _, r := range surf {
			name := map[string]string{"max": "chat completions", "messages": "messages", "gencontent": "generate content"}[r.Scenario]
			fmt.Fprintf(rp.w, "| %s | %s | %s | %s / %s | %s | %s |\n", name, f0(r.Throughput), pct(r.SuccessPct), f3(r.Latency.P50), f3(r.Latency.P99), f1(r.CPUPerCallMicros), f1(r.PeakRSSMiB))
		}
	}
}

// embeddingsTable is (h): embeddings calls at saturation, each target
// against the same mock.
func (rp *report) embeddingsTable() {
	if !rp.header("(h) embeddings at saturation, OpenAI's /v1/embeddings", "embeddings", ratioColumn()) {
		return
	}
	rp.row("calls/s", "embeddings", func(r *Result) string { return f0(r.Throughput) }, ratio(func(r *Result) float64 { return r.Throughput }))
	rp.row("success", "embeddings", func(r *Result) string { return pct(r.SuccessPct) }, nil)
	rp.row("p50 / p90 / p99 (ms)", "embeddings", func(r *Result) string {
		return f3(r.Latency.P50) + " / " + f3(r.Latency.P90) + " / " + f3(r.Latency.P99)
	}, nil)
	rp.commonRows("embeddings")
}

// checks prints the targets, each with its figure and a verdict,
// for every svcgw measured.
func (rp *report) checks(genCounts map[string]int64, dbLocked int64) {
	line := func(name, measured string, pass bool, known bool) {
		v := "FAIL"
		switch {
		case !known:
			v = "not measured"
		case pass:
			v = "pass"
		}
		fmt.Fprintf(rp.w, "| %s | %s | %s |\n", name, measured, v)
	}
	for _, t := range svcgwTargets() {
		fmt.Fprintf(rp.w, "\n### %s against the issue 19 targets (one run; the added p99 target is the median of five)\n\n| target | measured | |\n|---|---|---|\n", t)
		for _, sc := range []struct{ scenario, driver string }{{"max", "closed-loop driver"}, {"max-vegeta", "vegeta"}} {
			name := fmt.Sprintf("max throughput ≥ %.1f × bare proxy (%s)", targetThroughputRatio, sc.driver)
			if p, s := rp.get(sc.scenario, "proxy"), rp.get(sc.scenario, t); p != nil && s != nil && p.Throughput > 0 {
				r := s.Throughput / p.Throughput
				line(name, fmt.Sprintf("%.0f / %.0f req/s = %.2f×", s.Throughput, p.Throughput, r), r >= targetThroughputRatio, true)
			} else if sc.scenario == "max" {
				line(name, "–", false, false)
			}
		}
		if p, s := rp.get("stream", "proxy"), rp.get("stream", t); p != nil && s != nil && p.Throughput > 0 {
			r := s.Throughput / p.Throughput
			line(fmt.Sprintf("streams/s ≥ %.1f × bare proxy", targetStreamsRatio), fmt.Sprintf("%.0f / %.0f streams/s = %.2f×", s.Throughput, p.Throughput, r), r >= targetStreamsRatio, true)
		} else {
			line(fmt.Sprintf("streams/s ≥ %.1f × bare proxy", targetStreamsRatio), "–", false, false)
		}
		if p, s := rp.get("hold", "proxy"), rp.get("hold", t); p != nil && s != nil && p.PeakRSSMiB > 0 {
			// The figure counts only if every stream was open at the same
			// time and finished, on both: fewer open streams flatter it.
			r := s.PeakRSSMiB / p.PeakRSSMiB
			whole := s.OK == s.Requests && s.MaxOpen == s.Requests && p.OK == p.Requests && p.MaxOpen == p.Requests
			line(fmt.Sprintf("peak RSS with %d open streams ≤ %.2f × bare proxy", s.Requests, targetHoldRSSRatio),
				fmt.Sprintf("%.1f / %.1f MiB = %.2f× (%d/%d open at once, %d/%d completed)", s.PeakRSSMiB, p.PeakRSSMiB, r, s.MaxOpen, s.Requests, s.OK, s.Requests),
				r <= targetHoldRSSRatio && whole, s.Requests >= targetHoldStreams)
		} else {
			line(fmt.Sprintf("peak RSS with %d open streams ≤ %.2f × bare proxy", targetHoldStreams, targetHoldRSSRatio), "–", false, false)
		}
		// Added latency means nothing over a direct run that failed (a
		// starved driver or mock): the figure is then not measured.
		whole := func(r *Result) bool { return r != nil && r.Requests > 0 && r.OK == r.Requests }
		if s, d := rp.get("rate", t), rp.get("rate", "direct"); s != nil && d != nil && !whole(d) {
			line(fmt.Sprintf("added p99 at the constant rate ≤ +%.1f ms", targetAddedP99), fmt.Sprintf("direct itself failed (%s success): no floor", pct(d.SuccessPct)), false, false)
		} else if s != nil && d != nil {
			a99 := s.Latency.P99 - d.Latency.P99
			line(fmt.Sprintf("added p99 at %.0f req/s ≤ +%.1f ms (median of 5), none above +%.1f", s.Throughput, targetAddedP99, targetAddedP99Max),
				fmt.Sprintf("%+.3f ms (this run)", a99), a99 <= targetAddedP99, true)
		} else {
			line(fmt.Sprintf("added p99 at the constant rate ≤ +%.1f ms", targetAddedP99), "–", false, false)
		}
		if p, s := rp.get("embeddings", "proxy"), rp.get("embeddings", t); p != nil && s != nil && p.Throughput > 0 {
			r := s.Throughput / p.Throughput
			line(fmt.Sprintf("embeddings calls/s ≥ %.1f × bare proxy (issue 36)", targetEmbedRatio), fmt.Sprintf("%.0f / %.0f calls/s = %.2f×", s.Throughput, p.Throughput, r), r >= targetEmbedRatio, true)
		}
		fmt.Fprintf(rp.w, "| *issue 8, still held:* | | |\n")
		if s := rp.get("rate", t); s != nil {
			line("constant rate: 100% success", pct(s.SuccessPct), s.OK == s.Requests && s.Requests > 0, true)
			if d := rp.get("rate", "direct"); whole(d) {
				a50 := s.Latency.P50 - d.Latency.P50
				line(fmt.Sprintf("constant rate: added p50 ≤ %.1f ms", targetAddedP50), fmt.Sprintf("%+.3f ms", a50), a50 <= targetAddedP50, true)
			}
		}
		if s, d := rp.get("streamrate", t), rp.get("streamrate", "direct"); s != nil && whole(d) && s.TTFT != nil && d.TTFT != nil {
			a := s.TTFT.P50 - d.TTFT.P50
			line(fmt.Sprintf("streaming: added TTFT p50 ≤ %.1f ms", targetAddedTTFT), fmt.Sprintf("%+.3f ms", a), a <= targetAddedTTFT, true)
		}
		var okTotal int64
		for _, byTarget := range rp.res {
			for name, r := range byTarget {
				// t@2, t@3…: the metrics comparison's repeats, served by
				// the same process.
				if name == t || strings.HasPrefix(name, t+"@") {
					okTotal += r.OKTotal
				}
			}
		}
		n, counted := genCounts[t]
		line("a generation record for every successful call", fmt.Sprintf("%d records, %d successful calls", n, okTotal), n == okTotal, counted)
	}
	fmt.Fprintf(rp.w, "\n| | | |\n|---|---|---|\n")
	line(`zero "database is locked" (every svcgw)`, fmt.Sprint(dbLocked), dbLocked == 0, dbLocked >= 0)
}

// perStreamKiB is what each of hold's open streams added to the resident
// set: the largest sample less the resident set before the streams, over
// the most streams open at once. The peak-RSS ratio also carries what each
// process holds with no stream at all (svcgw's binary and ledger, the
// proxy's almost nothing); this is the part that grows with the streams.
func perStreamKiB(r *Result) float64 {
	if r.MaxOpen <= 0 || r.StartRSSMiB <= 0 {
		return 0
	}
	return (r.MaxSampledRSSMiB - r.StartRSSMiB) * 1024 / float64(r.MaxOpen)
}

// floorTable, when bench/floor was measured, sets the proxy, the JSON
// floor and each svcgw side by side in throughput and CPU per call: what
// a minimal JSON-reading gateway on net/http reaches of the proxy, and
// what svcgw reaches of that.
func (rp *report) floorTable() {
	if !slices.Contains(targets, floorTarget) {
		return
	}
	tput := func(r *Result) float64 { return r.Throughput }
	cpu := func(r *Result) float64 { return r.CPUPerCallMicros }
	figs := []struct {
		label, scenario string
		get             func(*Result) float64
		format          func(float64) string
	}{
		{"(a) req/s, closed loop", "max", tput, f0},
		{"(a) req/s, vegeta", "max-vegeta", tput, f0},
		{"(a) CPU per call (µs), closed loop", "max", cpu, f1},
		{"(a) CPU per call (µs), vegeta", "max-vegeta", cpu, f1},
		{"(b) CPU per call at the constant rate (µs)", "rate", cpu, f1},
		{"(c) streams/s", "stream", tput, f0},
		{"(c) CPU per stream (µs)", "stream", cpu, f1},
		{"(d) peak RSS, open streams (MiB)", "hold", func(r *Result) float64 { return r.PeakRSSMiB }, f1},
	}
	svcgws := svcgwTargets()
	header := false
	for _, f := range figs {
		p, fl := rp.get(f.scenario, "proxy"), rp.get(f.scenario, floorTarget)
		if p == nil || fl == nil || f.get(p) == 0 || f.get(fl) == 0 {
			continue
		}
		if !header {
			header = true
			fmt.Fprintf(rp.w, "\n### the JSON floor (bench/floor: key check, decode, re-encode, meter; no database)\n\n")
			cols := []string{"proxy", "floor", "floor / proxy"}
			for _, t := range svcgws {
				cols = append(cols, t, t+" / floor")
			}
			fmt.Fprintf(rp.w, "| | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---:|", len(cols)))
		}
		cells := []string{f.label, f.format(f.get(p)), f.format(f.get(fl)), fmt.Sprintf("%.2f×", f.get(fl)/f.get(p))}
		for _, t := range svcgws {
			if s := rp.get(f.scenario, t); s != nil {
				cells = append(cells, f.format(f.get(s)), fmt.Sprintf("%.2f×", f.get(s)/f.get(fl)))
			} else {
				cells = append(cells, "–", "–")
			}
		}
		fmt.Fprintf(rp.w, "| %s |\n", strings.Join(cells, " | "))
	}
}
