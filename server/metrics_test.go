package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// metricsGateway is a test gateway with metrics on, its store reporting
// commits to them, and the admin handler on a server of its own.
type metricsGateway struct {
	*testGateway
	Metrics  *Metrics
	AdminURL string
}

func newMetricsGateway(t *testing.T, mo MetricsOptions, opts ...gatewayOption) *metricsGateway {
	t.Helper()
	m := NewMetrics(mo)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{OnCommit: m.ObserveCommit})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	opts = append([]gatewayOption{withStore(st), func(o *Options) { o.Metrics = m }}, opts...)
	gw := newTestGateway(t, opts...)
	admin := httptest.NewServer(gw.Server.Admin(AdminOptions{Reload: func(context.Context) error { return nil }, OpenMetrics: true}))
	t.Cleanup(admin.Close)
	return &metricsGateway{testGateway: gw, Metrics: m, AdminURL: admin.URL}
}

// scrape reads the admin listener's /metrics as Prometheus would.
func (gw *metricsGateway) scrape(t *testing.T) scraped {
	t.Helper()
	resp, err := http.Get(gw.AdminURL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

type scraped map[string]*dto.MetricFamily

// value is the value of the series of family name whose labels include
// the given pairs (summed over the others); a histogram's is its count.
func (s scraped) value(name string, labels ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		if !hasLabels(m, labels...) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// histSum is the sum of the observations of histogram name's matching
// series.
func (s scraped) histSum(name string, labels ...string) float64 {
	var sum float64
	if f := s[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, labels...) && m.Histogram != nil {
				sum += m.Histogram.GetSampleSum()
			}
		}
	}
	return sum
}

// labelValues lists the values label takes in family name.
func (s scraped) labelValues(name, label string) []string {
	var out []string
	if f := s[name]; f != nil {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == label && !slices.Contains(out, lp.GetValue()) {
					out = append(out, lp.GetValue())
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func hasLabels(m *dto.Metric, labels ...string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.Label {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

const metricsChat = `{"model":"svc-fusion","messages":[{"role":"user","content":"Write a haiku about the sea."}],"max_tokens":64}`

func TestAdmin_NothingOnTheCallerAddress(t *testing.T) {
	is := is.New(t)
	gw := newMetricsGateway(t, MetricsOptions{})
	token, _, err := gw.Store.CreateAdminToken(context.Background(), "ops", false)
	is.NoErr(err)
	readOnly, _, err := gw.Store.CreateAdminToken(context.Background(), "viewer", true)
	is.NoErr(err)
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		resp, body := gw.do(t, http.MethodGet, path, "")
		is.Equal(resp.StatusCode, http.StatusNotFound)                                   // not on the caller address
		is.True(!strings.Contains(string(body), "svcgw_"))                               // no metric
		is.True(!strings.Contains(string(body), "goroutine profile"))                    // no profile
		is.Equal(adminStatus(t, http.MethodGet, gw.AdminURL+path, token), http.StatusOK) // on the admin listener
		if path != "/metrics" {                                                          // open here (AdminOptions.OpenMetrics)
			is.Equal(adminStatus(t, http.MethodGet, gw.AdminURL+path, ""), http.StatusUnauthorized) // with an admin token only
		}
	}
	resp, _ := gw.do(t, http.MethodPost, "/-/reload", "")
	is.Equal(resp.StatusCode, http.StatusNotFound) // reload: admin only
	is.Equal(adminStatus(t, http.MethodPost, gw.AdminURL+"/-/reload", token), http.StatusOK)
	is.Equal(adminStatus(t, http.MethodPost, gw.AdminURL+"/-/reload", ""), http.StatusUnauthorized)
	is.Equal(adminStatus(t, http.MethodPost, gw.AdminURL+"/-/reload", readOnly), http.StatusForbidden) // a change
	// The probes answer on both, without a token.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, _ := gw.do(t, http.MethodGet, path, "")
		is.Equal(resp.StatusCode, http.StatusOK)
		is.Equal(adminStatus(t, http.MethodGet, gw.AdminURL+path, ""), http.StatusOK)
	}
}

// adminStatus sends a request to the admin listener, with the admin token
// when not empty, and returns its status.
func adminStatus(t *testing.T, method, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestMetrics_OneRecordPerCall(t *testing.T) {
	is := is.New(t)
	gw := newMetricsGateway(t, MetricsOptions{Version: "1.2.3", Commit: "abc", GoVersion: "go1.26"})
	ctx := context.Background()

	resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", metricsChat)
	is.Equal(resp.StatusCode, http.StatusOK) // a call
	requestType := resp.Header.Get("X-SVC-Request-Type")
	var reply struct {
		ID string `json:"id"`
	}
	is.NoErr(json.Unmarshal(body, &reply))
	stream := strings.Replace(metricsChat, `"max_tokens"`, `"stream":true,"stream_options":{"include_usage":true},"max_tokens"`, 1)
	resp, body = gw.do(t, http.MethodPost, "/svc/v1/chat/completions", stream)
	is.Equal(resp.StatusCode, http.StatusOK) // a stream
	var first struct {
		ID string `json:"id"`
	}
	is.NoErr(json.Unmarshal([]byte(strings.TrimPrefix(strings.SplitN(string(body), "\n", 2)[0], "data: ")), &first))
	resp, _ = gw.do(t, http.MethodPost, "/svc/v1/messages", `{"model":"m","messages":[]}`, "Anthropic-Version", "2023-06-01")
	is.Equal(resp.StatusCode, http.StatusBadRequest) // a refusal
	resp, _ = gw.do(t, http.MethodGet, "/svc/v1/credits", "")
	is.Equal(resp.StatusCode, http.StatusOK) // not an inference call
	is.NoErr(gw.Store.Sync(ctx))

	// What the ledger recorded is what the metrics count.
	acct, err := gw.Store.AccountByName(ctx, "acme")
	is.NoErr(err)
	var in, out, micros float64
	for _, id := range []string{reply.ID, first.ID} {
		g, err := gw.Store.Generation(ctx, acct.ID, id)
		is.NoErr(err) // recorded
		in += float64(g.PromptTokens)
		out += float64(g.CompletionTokens)
		micros += float64(g.Cost)
	}

	m := gw.scrape(t)
	is.Equal(m.value("svcgw_requests_total", "surface", "chat", "request_type", requestType, "status_class", "2xx"), 2.0)
	is.Equal(m.value("svcgw_requests_total", "surface", "messages", "request_type", "unclassified", "status_class", "4xx"), 1.0)
	is.Equal(m.value("svcgw_requests_total"), 3.0) // the credits read is no call
	is.Equal(m.value("svcgw_tokens_total", "token_type", "input"), in)
	is.Equal(m.value("svcgw_tokens_total", "token_type", "output"), out)
	is.Equal(m.value("svcgw_cost_microdollars_total", "request_type", requestType), float64(int64(micros+0.5)))
	is.Equal(m.value("svcgw_request_duration_seconds", "surface", "chat"), 2.0) // both answered calls
	is.Equal(m.value("svcgw_time_to_first_token_seconds"), 1.0)                 // the stream only
	is.Equal(m.value("svcgw_overhead_seconds", "stream", "true"), 1.0)
	is.Equal(m.value("svcgw_overhead_seconds", "stream", "false"), 1.0)
	is.True(m.histSum("svcgw_overhead_seconds") > 0) // measured
	is.Equal(m.value("svcgw_upstream_attempts_total", "candidate", "fixture", "outcome", "ok"), 2.0)
	is.Equal(m.value("svcgw_upstream_attempt_duration_seconds", "candidate", "fixture"), 2.0)
	is.Equal(m.value("svcgw_streams_open"), 0.0) // closed again
	is.Equal(m.value("svcgw_upstream_breaker_open", "candidate", "fixture"), 0.0)
	is.True(m["svcgw_upstream_breaker_open"] != nil) // reported while closed
	is.Equal(m.value("svcgw_routes_blocked"), 0.0)
	is.Equal(m.value("svcgw_ledger_generations_committed_total"), 2.0)
	is.Equal(m.value("svcgw_ledger_queue_depth"), 0.0)
	is.Equal(m.value("svcgw_ledger_queue_limit"), 4096.0)
	is.Equal(m.value("svcgw_ledger_failing"), 0.0)
	is.True(m.value("svcgw_ledger_commit_duration_seconds", "result", "ok") >= 1)
	is.Equal(m.histSum("svcgw_ledger_batch_size"), 2.0) // rows committed
	is.Equal(m.value("svcgw_db_pool_max_connections", "pool", "writer"), 1.0)
	is.True(m["svcgw_db_pool_waits_total"] != nil)
	is.Equal(m.value("svcgw_build_info", "version", "1.2.3", "commit", "abc"), 1.0)
	is.Equal(m.value("svcgw_config_last_reload_successful"), 1.0)
	is.True(m["go_goroutines"] != nil && m["process_cpu_seconds_total"] != nil) // runtime and process

	// Bounded labels: no key, account or application anywhere.
	for name, f := range m {
		for _, s := range f.Metric {
			for _, lp := range s.Label {
				switch lp.GetName() {
				case "key", "key_id", "account", "account_id", "application":
					t.Errorf("%s has a %s label", name, lp.GetName())
				}
			}
		}
	}
}

func TestMetrics_ApplicationLabelsAreCapped(t *testing.T) {
	is := is.New(t)
	gw := newMetricsGateway(t, MetricsOptions{ApplicationLabels: 2})
	for _, app := range []string{"alpha", "beta", "gamma", "delta", "alpha"} {
		resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", metricsChat, "X-Title", app)
		is.Equal(resp.StatusCode, http.StatusOK)
	}
	m := gw.scrape(t)
	is.Equal(m.labelValues("svcgw_requests_total", "application"), []string{"alpha", "beta", "other"})
	is.Equal(m.value("svcgw_requests_total", "application", "alpha"), 2.0)
	is.Equal(m.value("svcgw_requests_total", "application", "other"), 2.0) // gamma and delta
	is.Equal(m.labelValues("svcgw_tokens_total", "application"), []string{"alpha", "beta", "other"})
	is.Equal(m.labelValues("svcgw_cost_microdollars_total", "application"), []string{"alpha", "beta", "other"})
	is.Equal(len(m.labelValues("svcgw_request_duration_seconds", "application")), 0) // histograms stay per type
}

func TestAttemptOutcome(t *testing.T) {
	timeout := upstream.Outcome(llm.KindTimeout)
	overloaded := upstream.Outcome(llm.KindOverloaded)
	for _, tc := range []struct {
		name     string
		attempts []upstream.Attempt
		want     []string
	}{
		{"served at once", []upstream.Attempt{{Outcome: upstream.OutcomeOK}}, []string{"ok"}},
		{"retried then served", []upstream.Attempt{{Outcome: overloaded}, {Outcome: upstream.OutcomeOK, Retry: true}}, []string{"retried", "ok"}},
		{"fell back", []upstream.Attempt{{Outcome: overloaded}, {Outcome: upstream.OutcomeOK}}, []string{"fell_back", "ok"}},
		{"timed out, then retried", []upstream.Attempt{{Outcome: timeout}, {Outcome: upstream.OutcomeOK, Retry: true}}, []string{"timed_out", "ok"}},
		{"breaker opened", []upstream.Attempt{{Outcome: overloaded, BreakerOpen: true}, {Outcome: overloaded}}, []string{"breaker_open", "failed"}},
		{"caller left", []upstream.Attempt{{Outcome: upstream.OutcomeCanceled}}, []string{"canceled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := upstream.Report{Attempts: tc.attempts}
			var got []string
			for i := range tc.attempts {
				got = append(got, outcomes[attemptOutcome(rep, i)])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// downBackend fails every call as overloaded.
type downBackend struct{}

func (downBackend) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Kind: llm.KindOverloaded, Message: "busy"}
}

func (downBackend) Stream(context.Context, *llm.Request) (upstream.Stream, error) {
	return nil, &llm.Error{Kind: llm.KindOverloaded, Message: "busy"}
}

func TestReadiness_BreakersOpenOnEveryCandidate(t *testing.T) {
	is := is.New(t)
	router := upstream.NewRouterWithOptions(upstream.RouterOptions{
		MaxRetries: -1, BreakerThreshold: 2, BreakerCooldown: time.Hour,
		Logger: slog.New(slog.DiscardHandler),
	}, []upstream.Candidate{{Name: "vendor-a/secret-model", Backend: downBackend{}}})
	gw := newMetricsGateway(t, MetricsOptions{}, func(o *Options) { o.Router = router })

	// The first failure is reported as such; the second opens the breaker.
	for i, want := range []string{"failed", "breaker_open"} {
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", metricsChat)
		is.Equal(resp.StatusCode, http.StatusServiceUnavailable) // overloaded
		is.True(!strings.Contains(string(body), "vendor-a"))     // never named to callers
		m := gw.scrape(t)
		is.Equal(m.value("svcgw_upstream_attempts_total", "candidate", "vendor-a/secret-model", "outcome", want), 1.0)
		is.Equal(m.value("svcgw_upstream_errors_total", "candidate", "vendor-a/secret-model", "error_type", "overloaded"), float64(i+1))
	}
	m := gw.scrape(t)
	is.Equal(m.value("svcgw_upstream_breaker_open", "candidate", "vendor-a/secret-model"), 1.0)
	is.Equal(m.value("svcgw_upstream_consecutive_failures", "candidate", "vendor-a/secret-model"), 2.0)
	is.Equal(m.value("svcgw_routes_blocked"), float64(len(llm.RequestTypes)*len(llm.Tiers)))
	is.Equal(m.value("svcgw_requests_total", "status_class", "5xx"), 2.0)
	is.Equal(m.value("svcgw_request_duration_seconds"), 0.0) // no upstream answered

	type readiness struct {
		Status        string   `json:"status"`
		BlockedRoutes []string `json:"blocked_routes"`
		OpenBreakers  []string `json:"open_breakers"`
	}
	// The caller address: not ready, the routes named, the backend not.
	resp, body := gw.do(t, http.MethodGet, "/readyz", "")
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
	is.True(!strings.Contains(string(body), "vendor-a")) // callers never see a backend
	var r readiness
	is.NoErr(json.Unmarshal(body, &r))
	is.Equal(r.Status, "unavailable")
	is.Equal(len(r.BlockedRoutes), len(llm.RequestTypes)*len(llm.Tiers))
	is.True(slices.Contains(r.BlockedRoutes, "code/high"))
	// The admin listener names the candidate too.
	resp, err := http.Get(gw.AdminURL + "/readyz")
	is.NoErr(err)
	defer resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
	r = readiness{}
	is.NoErr(json.NewDecoder(resp.Body).Decode(&r))
	is.Equal(r.OpenBreakers, []string{"vendor-a/secret-model"})
}

func TestMetrics_StreamsOpen(t *testing.T) {
	is := is.New(t)
	slow := fixture.New(fixture.Options{TokensPerSecond: 20}) // the stream stays open a while
	gw := newMetricsGateway(t, MetricsOptions{}, func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "slow", Backend: slow}})
	})
	stream := strings.Replace(metricsChat, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
	req, err := http.NewRequest(http.MethodPost, gw.URL+"/svc/v1/chat/completions", strings.NewReader(stream))
	is.NoErr(err)
	req.Header.Set("Authorization", "Bearer "+gw.Key)
	resp, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	defer resp.Body.Close()
	_, err = bufio.NewReader(resp.Body).ReadString('\n') // the first frame
	is.NoErr(err)
	is.Equal(gw.scrape(t).value("svcgw_streams_open"), 1.0) // open while it streams
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for gw.scrape(t).value("svcgw_streams_open") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("svcgw_streams_open never went back to 0")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkMetrics_ObserveCall is what recording one call costs: a
// streamed call answered at the first attempt, with input, cached input
// and output tokens.
func BenchmarkMetrics_ObserveCall(b *testing.B) {
	m := NewMetrics(MetricsOptions{})
	start := time.Now()
	rec := &logRecord{
		call: true, metered: true, streamed: true,
		surface: llm.SurfaceChat, requestType: llm.TypePro,
		usage: llm.Usage{InputTokens: 1200, CachedInputTokens: 1024, OutputTokens: 300},
		cost:  4200, firstByte: start.Add(300 * time.Millisecond),
		backend: upstream.Report{Candidate: "openai/gpt", Attempts: []upstream.Attempt{
			{Candidate: "openai/gpt", Outcome: upstream.OutcomeOK, Duration: 290 * time.Millisecond},
		}},
	}
	end := start.Add(2 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		m.observeCall(rec, http.StatusOK, start, end)
	}
}

// downStore is a store whose readiness read fails the way a PostgreSQL
// server that is down makes it fail.
type downStore struct{ store.DB }

func (d downStore) Health(ctx context.Context) store.Health {
	h := d.DB.Health(ctx)
	h.Database = errors.New("failed to connect to `user=postgres database=svcgw`: 127.0.0.1:45995 (127.0.0.1): dial error: connection refused")
	return h
}

// Callers are told the database is unavailable, never its address, user or
// database name; the admin listener and the log have those.
func TestReadyz_CallersAreNotToldTheDatabasesInternals(t *testing.T) {
	is := is.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{})
	is.NoErr(err) // open store
	var logs syncLog
	gw := newTestGateway(t, withStore(downStore{st}), func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	admin := httptest.NewServer(gw.Server.Admin(AdminOptions{Reload: func(context.Context) error { return nil }, OpenMetrics: true}))
	t.Cleanup(admin.Close)
	resp, body := gw.do(t, http.MethodGet, "/readyz", "")
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
	is.Equal(strings.TrimSpace(string(body)), `{"status":"unavailable","database":"unavailable"}`)

	aresp, err := http.Get(admin.URL + "/readyz")
	is.NoErr(err)
	defer aresp.Body.Close()
	is.Equal(aresp.StatusCode, http.StatusServiceUnavailable)
	var r struct{ Database string }
	is.NoErr(json.NewDecoder(aresp.Body).Decode(&r))
	is.True(strings.Contains(r.Database, "failed to connect to `user=postgres database=svcgw`")) // the operator's detail
	resp, _ = gw.do(t, http.MethodGet, "/readyz", "")
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)          // probed again
	is.Equal(logs.count("readiness: the database did not answer"), 1) // logged once, however often it is probed
	is.Equal(logs.count("user=postgres database=svcgw"), 1)           // with the operator's detail
}
