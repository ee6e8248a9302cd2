//go:build bench

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The issue 8 targets the report checks.
const (
	targetThroughputRatio = 0.7  // svcgw max req/s over the bare proxy's
	targetAddedP50        = 0.3  // ms over direct at the constant rate
	targetAddedP99        = 2.0  // ms
	targetAddedTTFT       = 0.5  // ms, streaming p50
	targetHoldRSS         = 64.0 // MiB with 1,000 open streams
	targetHoldStreams     = 1000
)

var targets = []string{"direct", "proxy", "svcgw"}

// reportCmd prints the side-by-side tables of a run's result files and
// checks the targets. It fails only when it cannot read them.
func reportCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	genCount := fs.Int64("gen-count", -1, "generation records found in svcgw's database after the run (-1: not checked)")
	usageJSON := fs.String("usage-json", "", "output of 'svcgw usage --account A --json' after the run; its total.requests is the generation count")
	dbLocked := fs.Int64("db-locked", -1, `"database is locked" lines in svcgw's log (-1: not checked)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *usageJSON != "" {
		raw, err := os.ReadFile(*usageJSON)
		if err != nil {
			return err
		}
		var u struct {
			Total *struct {
				Requests *int64 `json:"requests"`
			} `json:"total"`
		}
		if err := json.Unmarshal(raw, &u); err != nil {
			return fmt.Errorf("%s: %w", *usageJSON, err)
		}
		if u.Total == nil || u.Total.Requests == nil {
			return fmt.Errorf("%s: no total.requests", *usageJSON)
		}
		*genCount = *u.Total.Requests
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
	}
	rp := &report{w: out, res: res}
	rp.tables()
	rp.metricsTable()
	rp.checks(*genCount, *dbLocked)
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
	sort.Float64s(vs)
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

type report struct {
	w   io.Writer
	res map[string]map[string]*Result
}

func (rp *report) get(scenario, target string) *Result { return rp.res[scenario][target] }

// row prints one table row: a label, one cell per target, and a last
// column computed from the three results (ratio or added latency).
func (rp *report) row(label, scenario string, cell func(*Result) string, last func(direct, proxy, svcgw *Result) string) {
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
		l = last(rp.get(scenario, "direct"), rp.get(scenario, "proxy"), rp.get(scenario, "svcgw"))
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
	fmt.Fprintf(rp.w, "| | direct | proxy | svcgw | %s |\n|---|---:|---:|---:|---:|\n", last)
	return true
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

// added prints "proxy +x / svcgw +y" for one latency figure.
func added(get func(*Result) float64) func(d, p, s *Result) string {
	return func(d, p, s *Result) string {
		if d == nil {
			return ""
		}
		var parts []string
		if p != nil {
			parts = append(parts, fmt.Sprintf("proxy %+.3f", get(p)-get(d)))
		}
		if s != nil {
			parts = append(parts, fmt.Sprintf("svcgw %+.3f", get(s)-get(d)))
		}
		return strings.Join(parts, ", ")
	}
}

func (rp *report) commonRows(scenario string) {
	rp.row("CPU per call (µs)", scenario, func(r *Result) string { return f1(r.CPUPerCallMicros) }, func(_, p, s *Result) string {
		if p == nil || s == nil || p.CPUPerCallMicros == 0 {
			return ""
		}
		return fmt.Sprintf("svcgw/proxy %.2f×", s.CPUPerCallMicros/p.CPUPerCallMicros)
	})
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
	if rp.header("(a) maximum throughput, non-streaming chat completions", "max", "svcgw / proxy") {
		rp.row("req/s", "max", func(r *Result) string { return f0(r.Throughput) }, func(_, p, s *Result) string {
			if p == nil || s == nil || p.Throughput == 0 {
				return ""
			}
			return fmt.Sprintf("%.2f×", s.Throughput/p.Throughput)
		})
		rp.row("success", "max", func(r *Result) string { return pct(r.SuccessPct) }, nil)
		rp.row("p50 / p90 / p99 (ms)", "max", func(r *Result) string {
			return f3(r.Latency.P50) + " / " + f3(r.Latency.P90) + " / " + f3(r.Latency.P99)
		}, nil)
		rp.commonRows("max")
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
		fmt.Fprintf(rp.w, "| | direct | proxy | svcgw | svcgw vs direct / proxy |\n|---|---:|---:|---:|---:|\n")
		rp.row("streams/s (closed loop)", "stream", func(r *Result) string { return f0(r.Throughput) }, func(_, p, s *Result) string {
			if p == nil || s == nil || p.Throughput == 0 {
				return ""
			}
			return fmt.Sprintf("svcgw/proxy %.2f×", s.Throughput/p.Throughput)
		})
		rp.row("success (closed loop)", "stream", func(r *Result) string { return pct(r.SuccessPct) }, nil)
		rp.row("CPU per stream (µs)", "stream", func(r *Result) string { return f1(r.CPUPerCallMicros) }, func(_, p, s *Result) string {
			if p == nil || s == nil || p.CPUPerCallMicros == 0 {
				return ""
			}
			return fmt.Sprintf("svcgw/proxy %.2f×", s.CPUPerCallMicros/p.CPUPerCallMicros)
		})
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
	if rp.header("(d) concurrent open streams (slow upstream)", "hold", "") {
		rp.row("streams completed", "hold", func(r *Result) string { return fmt.Sprintf("%d / %d", r.OK, r.Requests) }, nil)
		rp.row("open at once (max)", "hold", func(r *Result) string { return fmt.Sprint(r.MaxOpen) }, nil)
		rp.row("TTFT p50 / p99 (ms)", "hold", func(r *Result) string {
			if r.TTFT == nil {
				return "–"
			}
			return f3(r.TTFT.P50) + " / " + f3(r.TTFT.P99)
		}, nil)
		rp.row("peak RSS, VmHWM (MiB)", "hold", func(r *Result) string { return f1(r.PeakRSSMiB) }, nil)
		rp.row("max sampled VmRSS (MiB)", "hold", func(r *Result) string { return f1(r.MaxSampledRSSMiB) }, nil)
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

// checks prints the targets, each with its figure and a verdict.
func (rp *report) checks(genCount, dbLocked int64) {
	fmt.Fprintf(rp.w, "\n### svcgw against the issue 8 targets\n\n| target | measured | |\n|---|---|---|\n")
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
	if p, s := rp.get("max", "proxy"), rp.get("max", "svcgw"); p != nil && s != nil && p.Throughput > 0 {
		ratio := s.Throughput / p.Throughput
		line("max throughput ≥ 0.7 × bare proxy", fmt.Sprintf("%.0f / %.0f req/s = %.2f×", s.Throughput, p.Throughput, ratio), ratio >= targetThroughputRatio, true)
	} else {
		line("max throughput ≥ 0.7 × bare proxy", "–", false, false)
	}
	if s := rp.get("rate", "svcgw"); s != nil {
		line("constant rate: 100% success", pct(s.SuccessPct), s.OK == s.Requests && s.Requests > 0, true)
		if d := rp.get("rate", "direct"); d != nil {
			a50, a99 := s.Latency.P50-d.Latency.P50, s.Latency.P99-d.Latency.P99
			line("constant rate: added p50 ≤ 0.3 ms", fmt.Sprintf("%+.3f ms", a50), a50 <= targetAddedP50, true)
			line("constant rate: added p99 ≤ 2 ms", fmt.Sprintf("%+.3f ms", a99), a99 <= targetAddedP99, true)
		}
	}
	line(`zero "database is locked"`, fmt.Sprint(dbLocked), dbLocked == 0, dbLocked >= 0)
	if s, d := rp.get("streamrate", "svcgw"), rp.get("streamrate", "direct"); s != nil && d != nil && s.TTFT != nil && d.TTFT != nil {
		a := s.TTFT.P50 - d.TTFT.P50
		line("streaming: added TTFT p50 ≤ 0.5 ms", fmt.Sprintf("%+.3f ms", a), a <= targetAddedTTFT, true)
	}
	if s := rp.get("hold", "svcgw"); s != nil {
		// The figure counts only if every stream was open at the same time
		// and finished: fewer open streams would flatter it.
		line(fmt.Sprintf("peak RSS ≤ 64 MiB with %d open streams", s.Requests),
			fmt.Sprintf("%.1f MiB (%d open at once, %d/%d completed)", s.PeakRSSMiB, s.MaxOpen, s.OK, s.Requests),
			s.PeakRSSMiB <= targetHoldRSS && s.OK == s.Requests && s.MaxOpen == s.Requests, s.Requests >= targetHoldStreams)
	}
	var okTotal int64
	for _, byTarget := range rp.res {
		for name, r := range byTarget {
			// svcgw@2, svcgw@3…: the metrics comparison's repeats, served
			// by the same process.
			if name == "svcgw" || strings.HasPrefix(name, "svcgw@") {
				okTotal += r.OKTotal
			}
		}
	}
	line("a generation record for every successful call", fmt.Sprintf("%d records, %d successful calls", genCount, okTotal), genCount == okTotal, genCount >= 0)
}
