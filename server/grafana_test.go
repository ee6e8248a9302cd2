package server

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestGrafanaDashboard_UsesOnlyRealMetrics keeps the example dashboard
// (docs/grafana/svcgw.json) honest: every svcgw_ series its queries read
// is one svcgw exports, and every label they group or filter by is one of
// that metric's.
func TestGrafanaDashboard_UsesOnlyRealMetrics(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana/svcgw.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}

	// What the registry describes: each metric's labels. Const labels
	// count too (svcgw_build_info's), and every series may carry the
	// scrape's own instance and job.
	labels := map[string]map[string]bool{}
	ch := make(chan *prometheus.Desc, 256)
	go func() { NewMetrics(MetricsOptions{ApplicationLabels: 1}).Registry().Describe(ch); close(ch) }()
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}`)
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("unexpected Desc format: %s", d)
		}
		set := map[string]bool{"instance": true, "job": true}
		for _, kv := range strings.Split(m[2], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				set[k] = true
			}
		}
		for _, l := range strings.Split(m[3], ",") {
			set[l] = true
		}
		if strings.HasSuffix(m[1], "_seconds") || strings.HasSuffix(m[1], "_size") {
			set["le"] = true // histograms
		}
		labels[m[1]] = set
	}

	seriesRE := regexp.MustCompile(`\b(svcgw_[a-z_]+?)(_bucket|_sum|_count)?\b(\{[^}]*\})?`)
	byRE := regexp.MustCompile(`by \(([^)]*)\)`)
	matcherRE := regexp.MustCompile(`([a-z_]+)\s*(=~|!=|=)`)
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range seriesRE.FindAllStringSubmatch(tg.Expr, -1) {
				name := m[1]
				ls, ok := labels[name]
				if !ok && m[2] != "" {
					ls, ok = labels[name+m[2]] // a counter named …_count, say
				}
				if !ok {
					t.Errorf("panel %q reads %s, which svcgw does not export", p.Title, m[0])
					continue
				}
				used++
				for _, mm := range matcherRE.FindAllStringSubmatch(m[3], -1) {
					if !ls[mm[1]] {
						t.Errorf("panel %q filters %s by %q, which it does not have", p.Title, name, mm[1])
					}
				}
				for _, b := range byRE.FindAllStringSubmatch(tg.Expr, -1) {
					for _, l := range strings.Split(b[1], ",") {
						if l = strings.TrimSpace(l); l != "" && !ls[l] {
							t.Errorf("panel %q groups %s by %q, which it does not have", p.Title, name, l)
						}
					}
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("the dashboard reads %d svcgw series; want it to show the metrics", used)
	}
}
