//go:build bench

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reportOf writes results as run.sh leaves them and returns load report's
// tables of them.
func reportOf(t *testing.T, results ...Result) string {
	t.Helper()
	saved := slices.Clone(targets)
	t.Cleanup(func() { targets = saved })
	dir := t.TempDir()
	var files []string
	for _, r := range results {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, r.Scenario+"-"+r.Target+".json")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	slices.Sort(files) // as the shell's glob gives them
	var out bytes.Buffer
	if err := reportCmd(files, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// runResults are one scenario's results: target, req/s and CPU per call.
func runResults(scenario string, figs ...any) []Result {
	var rs []Result
	for i := 0; i < len(figs); i += 3 {
		rs = append(rs, Result{
			Target: figs[i].(string), Scenario: scenario, Detail: "closed loop",
			Requests: 100, OK: 100, SuccessPct: 100,
			Throughput: figs[i+1].(float64), CPUPerCallMicros: figs[i+2].(float64),
		})
	}
	return rs
}

func TestReport_Floor(t *testing.T) {
	rs := runResults("max", "direct", 40000.0, 20.0, "floor", 9000.0, 90.0, "proxy", 10000.0, 80.0, "svcgw", 6000.0, 160.0, "floor-copy", 9500.0, 85.0)
	rs = append(rs, runResults("stream", "direct", 20000.0, 40.0, "floor", 4000.0, 200.0, "proxy", 8000.0, 120.0, "svcgw", 5000.0, 190.0)...)
	out := reportOf(t, rs...)

	for _, want := range []string{
		// The floors stand between the proxy and svcgw.
		"| | direct | proxy | floor-copy | floor | svcgw | svcgw, floor / proxy; svcgw / floor |",
		"| req/s | 40000 | 10000 | 9500 | 9000 | 6000 | floor-copy/proxy 0.95×, floor/proxy 0.90×, svcgw/proxy 0.60×, svcgw/floor 0.67× |",
		"| CPU per call (µs) | 20.0 | 80.0 | 85.0 | 90.0 | 160.0 | floor-copy/proxy 1.06×, floor/proxy 1.12×, svcgw/proxy 2.00×, svcgw/floor 1.78× |",
		"| streams/s (closed loop) | 20000 | 8000 | – | 4000 | 5000 | floor/proxy 0.50×, svcgw/proxy 0.62×, svcgw/floor 1.25× |",
		"### the JSON floor (bench/floor",
		"| (a) req/s, closed loop | 10000 | 9000 | 0.90× | 6000 | 0.67× |",
		"| (a) CPU per call (µs), closed loop | 80.0 | 90.0 | 1.12× | 160.0 | 1.78× |",
		"| (c) streams/s | 8000 | 4000 | 0.50× | 5000 | 1.25× |",
		// The targets stay against the proxy.
		"| max throughput ≥ 0.8 × bare proxy (closed-loop driver) | 6000 / 10000 req/s = 0.60× | FAIL |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in the report:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(a) req/s, vegeta") {
		t.Errorf("the floor table shows a scenario that was not run:\n%s", out)
	}
}

// Without a floor, the tables are what they were before it.
func TestReport_NoFloor(t *testing.T) {
	out := reportOf(t, runResults("max", "direct", 40000.0, 20.0, "proxy", 10000.0, 80.0, "svcgw", 6000.0, 160.0, "svcgw-h2c", 6500.0, 150.0)...)
	for _, want := range []string{
		"| | direct | proxy | svcgw | svcgw-h2c | svcgw / proxy |",
		"| req/s | 40000 | 10000 | 6000 | 6500 | svcgw/proxy 0.60×, svcgw-h2c/proxy 0.65× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in the report:\n%s", want, out)
		}
	}
	if strings.Contains(out, "floor") {
		t.Errorf("a report without a floor mentions one:\n%s", out)
	}
}

// TestReport_Tracing: the tracing comparison's runs make table (g), pair
// by pair, with the medians of the differences judged against issue
// 38's targets, and svcgw-traced is no column of the other tables.
func TestReport_Tracing(t *testing.T) {
	rate := func(target string, p99, cpu float64) Result {
		return Result{Target: target, Scenario: "rate", Detail: "2000 req/s", Requests: 100, OK: 100, SuccessPct: 100,
			Throughput: 2000, Latency: Quantiles{P50: 0.5, P99: p99}, CPUPerCallMicros: cpu}
	}
	out := reportOf(t,
		rate("direct", 1.0, 90), rate("svcgw", 2.0, 200), rate("svcgw-traced", 2.1, 205),
		rate("svcgw@t2", 2.0, 200), rate("svcgw-traced@t2", 2.5, 210),
		rate("svcgw@t3", 2.0, 200), rate("svcgw-traced@t3", 2.05, 204),
	)
	for _, want := range []string{
		"### (g) the cost of tracing, rate",
		"3 pairs of runs",
		"| 1 | 2000 | 0.500 | 2.000 | 200.0 | 2000 | 0.500 | 2.100 | 205.0 | +0.100 | +2.5% |",
		"| 2 | 2000 | 0.500 | 2.000 | 200.0 | 2000 | 0.500 | 2.500 | 210.0 | +0.500 | +5.0% |",
		"| median | | | | | | | | | +0.100 | +2.5% |",
		"CPU per call at most +3% with every call traced: median +2.5% · PASS",
		"added p99 at most +0.2 ms: median +0.100 ms · PASS",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "| | direct") && strings.Contains(line, "svcgw-traced") {
			t.Errorf("svcgw-traced is a column: %s", line)
		}
	}
}
