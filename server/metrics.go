package server

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/upstream"
)

// Metrics are svcgw's Prometheus metrics, served by the admin listener
// (Admin) and never on the caller address. The README lists them, with
// their labels and the OpenTelemetry GenAI conventions they follow.
//
// They cost the hot path one record per call, taken where the call is
// already logged (withAccessLog, from what the pipeline and meter put in
// the access record), and one gauge move per stream opened and closed;
// nothing is recorded per stream chunk. The ledger reports each commit
// through store.Options.OnCommit (ObserveCommit). Everything else (the
// ledger's queue, the database pools, the circuit breakers) is read from
// snapshots when Prometheus scrapes.
//
// Labels are bounded: surfaces, request types, status classes, token
// types, candidates and outcomes are closed sets. Keys and accounts are
// never labels; applications (the attribution label) are, only when
// MetricsOptions.ApplicationLabels allows them, and then only so many.
//
// A nil *Metrics records nothing.
type Metrics struct {
	reg  *prometheus.Registry
	apps *appLabels // nil: no application label

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	overhead    *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	cost        *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	attemptTime *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	streams     prometheus.Gauge
	commitTime  *prometheus.HistogramVec
	batchRows   prometheus.Histogram
	reloads     *prometheus.CounterVec
	reloadOK    prometheus.Gauge
	reloadAt    prometheus.Gauge

	// series and candidates hold the call metrics resolved per label
	// values: seriesKey → *series, candidate name → *candidateSeries.
	series, candidates sync.Map

	// src is the Server whose store and router the scrape-time collector
	// reads (New binds it).
	src atomic.Pointer[Server]
}

// MetricsOptions configure NewMetrics.
type MetricsOptions struct {
	// Version, Commit and GoVersion label svcgw_build_info.
	Version, Commit, GoVersion string
	// ApplicationLabels, when positive, adds an application label (the
	// call's attribution label: X-Title, the Referer's host or the key's
	// name) to svcgw_requests_total, svcgw_tokens_total and
	// svcgw_cost_microdollars_total, for at most this many distinct
	// applications; calls of any further one count as "other". Zero: no
	// application label.
	ApplicationLabels int
}

// Buckets. Durations follow OpenTelemetry's advice for
// gen_ai.server.request.duration and gen_ai.server.time_to_first_token,
// with finer buckets below 10 ms (fast and local upstreams); svcgw's own
// added time resolves tens of microseconds.
var (
	durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ttftBuckets     = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	overheadBuckets = []float64{0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}
	commitBuckets   = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	batchBuckets    = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
)

// Token types: gen_ai.token.type's values input and output, and the parts
// of them svcgw also counts.
const (
	tokenInput       = "input"        // every input token, cached and cache-write included
	tokenOutput      = "output"       // every output token, reasoning included
	tokenCachedInput = "cached_input" // input read from a prompt cache
	tokenCacheWrite  = "cache_write"  // input written to a prompt cache
	tokenReasoning   = "reasoning"    // output spent reasoning
)

// NewMetrics creates svcgw's metrics in a registry of their own, with Go's
// runtime and the process's metrics beside them.
func NewMetrics(o MetricsOptions) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	var appLabel []string
	if o.ApplicationLabels > 0 {
		m.apps = &appLabels{max: o.ApplicationLabels, seen: map[string]bool{}}
		appLabel = []string{"application"}
	}
	with := func(labels ...string) []string { return append(labels, appLabel...) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcgw_requests_total",
		Help: "Inference calls answered, by surface, request type (unclassified when refused before classification) and status class.",
	}, with("surface", "request_type", "status_class"))
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "svcgw_request_duration_seconds",
		Help:    "Duration of calls an upstream answered, from the request to the last byte (gen_ai.server.request.duration).",
		Buckets: durationBuckets,
	}, []string{"surface", "request_type"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "svcgw_time_to_first_token_seconds",
		Help:    "Time from the request to the first event of a stream (gen_ai.server.time_to_first_token); streams only.",
		Buckets: ttftBuckets,
	}, []string{"surface", "request_type"})
	m.overhead = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "svcgw_overhead_seconds",
		Help:    "svcgw's own added time per call: its duration (to the first event, for streams) less the time spent waiting for the upstream and for the caller's body.",
		Buckets: overheadBuckets,
	}, []string{"surface", "stream"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcgw_tokens_total",
		Help: "Tokens billed, by request type and token type (gen_ai.token.type: input, output; and the parts cached_input, cache_write of input and reasoning of output).",
	}, with("request_type", "token_type"))
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcgw_cost_microdollars_total",
		Help: "What callers were charged, in millionths of a USD, by request type.",
	}, with("request_type"))
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcgw_upstream_attempts_total",
		Help: "Upstream attempts by candidate and outcome: ok, retried, fell_back, timed_out, breaker_open, failed, canceled.",
	}, []string{"candidate", "outcome"})
	m.attemptTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "svcgw_upstream_attempt_duration_seconds",
		Help:    "Duration of upstream attempts, to the whole reply (or the first event, for streams), by candidate.",
		Buckets: durationBuckets,
	}, []string{"candidate"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcgw_upstream_errors_total",
		Help: "Failed upstream attempts by candidate and error type (error.type: rate_limited, overloaded, timeout, upstream, auth, …).",
	}, []string{"candidate", "error_type"})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "svcgw_streams_open",
		Help: "Streamed calls being relayed now.",
	})
	m.commitTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "svcgw_ledger_commit_duration_seconds",
		Help:    "Duration of ledger commits, by result (ok, error).",
		Buckets: commitBuckets,
	}, []string{"result"})
	m.batchRows = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "svcgw_ledger_batch_size",
		Help:    "Generations per ledger commit attempt.",
		Buckets: batchBuckets,
	})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcgw_config_reloads_total",
		Help: "Configuration reloads by result (ok, error).",
	}, []string{"result"})
	m.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "svcgw_config_last_reload_successful",
		Help: "1 when the last configuration reload (or the start) succeeded, 0 when it was refused and the previous configuration kept.",
	})
	m.reloadAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "svcgw_config_last_reload_success_timestamp_seconds",
		Help: "When the configuration in force was loaded (Unix time).",
	})
	m.reloadOK.Set(1)
	m.reloadAt.SetToCurrentTime()
	for _, r := range []string{"ok", "error"} {
		m.reloads.WithLabelValues(r)
		m.commitTime.WithLabelValues(r)
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "svcgw_build_info",
		Help:        "Always 1; the labels name the build.",
		ConstLabels: prometheus.Labels{"version": o.Version, "commit": o.Commit, "goversion": o.GoVersion},
	})
	build.Set(1)
	m.reg.MustRegister(
		m.requests, m.duration, m.ttft, m.overhead, m.tokens, m.cost,
		m.attempts, m.attemptTime, m.errors, m.streams,
		m.commitTime, m.batchRows, m.reloads, m.reloadOK, m.reloadAt, build,
		snapshotCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the metrics in Prometheus' text format (or OpenMetrics or
// protobuf, as the scraper asks).
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:          m.reg,
		EnableOpenMetrics: true,
	}))
}

// Registry is where the metrics live, for tests and for collectors of
// the caller's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// bind makes s the source of the scrape-time metrics.
func (m *Metrics) bind(s *Server) {
	if m != nil {
		m.src.Store(s)
	}
}

// ObserveCommit records one ledger commit attempt; pass it as
// store.Options.OnCommit.
func (m *Metrics) ObserveCommit(c store.LedgerCommit) {
	if m == nil {
		return
	}
	result := "ok"
	if c.Err != nil {
		result = "error"
	}
	m.commitTime.WithLabelValues(result).Observe(c.Duration.Seconds())
	m.batchRows.Observe(float64(c.Rows))
}

// ObserveReload records a configuration reload: err nil when the new
// configuration took effect, else why it was refused.
func (m *Metrics) ObserveReload(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		m.reloadOK.Set(0)
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
	m.reloadOK.Set(1)
	m.reloadAt.SetToCurrentTime()
}

// streamOpened and streamClosed count a stream open between them.
func (m *Metrics) streamOpened() {
	if m != nil {
		m.streams.Inc()
	}
}

func (m *Metrics) streamClosed() {
	if m != nil {
		m.streams.Dec()
	}
}

// observeCall records one request at its end, from its access record:
// nothing unless it is an inference call.
func (m *Metrics) observeCall(rec *logRecord, status int, start, end time.Time) {
	if m == nil || !rec.call {
		return
	}
	rt := string(rec.requestType)
	if rt == "" {
		rt = "unclassified"
	}
	var app string
	if m.apps != nil {
		app = m.apps.label(rec.app)
	}
	ser := m.seriesOf(seriesKey{surface: string(rec.surface), requestType: rt, app: app})
	if i := classIndex(status); i >= 0 {
		ser.requests[i].Inc()
	} else {
		m.requests.WithLabelValues(withApp(app, string(rec.surface), rt, statusClass(status))...).Inc()
	}
	wait := m.observeAttempts(rec.backend)
	if !rec.metered {
		return
	}
	ser.duration.Observe(end.Sub(start).Seconds())
	own, streamed := end.Sub(start), 0
	if rec.streamed {
		first := rec.firstByte
		if first.IsZero() {
			first = end // a stream that ended without an event
		}
		own, streamed = first.Sub(start), 1
		ser.ttft.Observe(own.Seconds())
	}
	ser.overhead[streamed].Observe(max(own-wait-rec.bodyRead, 0).Seconds())
	u := rec.usage
	for i, n := range [len(tokenTypes)]int{u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheCreationTokens, u.ReasoningTokens} {
		if n > 0 {
			ser.tokens[i].Add(float64(n))
		}
	}
	if rec.cost > 0 {
		ser.cost.Add(float64(rec.cost))
	}
}

// tokenTypes are the token_type label's values, in the order of
// series.tokens.
var tokenTypes = [...]string{tokenInput, tokenOutput, tokenCachedInput, tokenCacheWrite, tokenReasoning}

// statusClasses are the status_class values of series.requests.
var statusClasses = [...]string{"2xx", "4xx", "5xx", "canceled"}

// classIndex is status's place in statusClasses, or -1.
func classIndex(status int) int {
	switch statusClass(status) {
	case "2xx":
		return 0
	case "4xx":
		return 1
	case "5xx":
		return 2
	case "canceled":
		return 3
	}
	return -1
}

// seriesKey names the call metrics of one surface, request type and
// application ("" without the application label).
type seriesKey struct{ surface, requestType, app string }

// series are the call metrics of one seriesKey, resolved once and kept:
// WithLabelValues hashes its labels and looks the child up on every use,
// which was most of what recording a call cost. Resolving them creates
// their series at zero, as Prometheus advises for known label values.
type series struct {
	requests       [len(statusClasses)]prometheus.Counter
	duration, ttft prometheus.Observer
	overhead       [2]prometheus.Observer // not streamed, streamed
	tokens         [len(tokenTypes)]prometheus.Counter
	cost           prometheus.Counter
}

func (m *Metrics) seriesOf(k seriesKey) *series {
	if v, ok := m.series.Load(k); ok {
		return v.(*series)
	}
	s := &series{
		duration: m.duration.WithLabelValues(k.surface, k.requestType),
		ttft:     m.ttft.WithLabelValues(k.surface, k.requestType),
		overhead: [2]prometheus.Observer{
			m.overhead.WithLabelValues(k.surface, "false"),
			m.overhead.WithLabelValues(k.surface, "true"),
		},
		cost: m.cost.WithLabelValues(withApp(k.app, k.requestType)...),
	}
	for i, c := range statusClasses {
		s.requests[i] = m.requests.WithLabelValues(withApp(k.app, k.surface, k.requestType, c)...)
	}
	for i, t := range tokenTypes {
		s.tokens[i] = m.tokens.WithLabelValues(withApp(k.app, k.requestType, t)...)
	}
	v, _ := m.series.LoadOrStore(k, s)
	return v.(*series)
}

// observeAttempts records a call's upstream attempts, and returns how long
// the call waited for upstreams: the attempts and the backoffs between
// them.
func (m *Metrics) observeAttempts(rep upstream.Report) time.Duration {
	var wait time.Duration
	for i, a := range rep.Attempts {
		wait += a.Duration + a.Backoff
		c := m.candidateOf(a.Candidate)
		c.attempts[attemptOutcome(rep, i)].Inc()
		c.duration.Observe(a.Duration.Seconds())
		if a.Outcome != upstream.OutcomeOK && a.Outcome != upstream.OutcomeCanceled {
			m.errors.WithLabelValues(a.Candidate, string(a.Outcome)).Inc() // failures only: rare
		}
	}
	return wait
}

// candidateSeries are one candidate's attempt metrics, resolved once (see
// series).
type candidateSeries struct {
	attempts [len(outcomes)]prometheus.Counter // by outcome
	duration prometheus.Observer
}

func (m *Metrics) candidateOf(name string) *candidateSeries {
	if v, ok := m.candidates.Load(name); ok {
		return v.(*candidateSeries)
	}
	c := &candidateSeries{duration: m.attemptTime.WithLabelValues(name)}
	for i, o := range outcomes {
		c.attempts[i] = m.attempts.WithLabelValues(name, o)
	}
	v, _ := m.candidates.LoadOrStore(name, c)
	return v.(*candidateSeries)
}

// outcomes are the outcome label's values; attemptOutcome returns an
// index into them.
var outcomes = [...]string{"ok", "canceled", "timed_out", "breaker_open", "retried", "fell_back", "failed"}

const (
	outcomeOK = iota
	outcomeCanceled
	outcomeTimedOut
	outcomeBreakerOpen
	outcomeRetried
	outcomeFellBack
	outcomeFailed
)

// attemptOutcome is the outcome of the i-th attempt of rep: the first of
// these that applies.
//
//	ok            it served the call
//	canceled      the caller left first
//	timed_out     the upstream did not answer in time
//	breaker_open  it failed, and its candidate's breaker is open
//	retried       it failed, and the same candidate was tried again
//	fell_back     it failed, and the next candidate was tried
//	failed        it failed, and the call failed with it
func attemptOutcome(rep upstream.Report, i int) int {
	a := rep.Attempts[i]
	switch {
	case a.Outcome == upstream.OutcomeOK:
		return outcomeOK
	case a.Outcome == upstream.OutcomeCanceled:
		return outcomeCanceled
	case a.Outcome == upstream.Outcome(llm.KindTimeout):
		return outcomeTimedOut
	case a.BreakerOpen:
		return outcomeBreakerOpen
	case i+1 < len(rep.Attempts) && rep.Attempts[i+1].Retry:
		return outcomeRetried
	case i+1 < len(rep.Attempts):
		return outcomeFellBack
	}
	return outcomeFailed
}

// statusClass is 2xx, 4xx or 5xx, or canceled for a call whose caller went
// away before it was answered (StatusClientClosed); 1xx and 3xx, which
// svcgw never answers a call with, keep their own.
func statusClass(status int) string {
	if status == 0 {
		status = http.StatusOK // nothing written: net/http answers 200
	}
	if status == StatusClientClosed {
		return "canceled"
	}
	switch status / 100 {
	case 2:
		return "2xx"
	case 4:
		return "4xx"
	case 5:
		return "5xx"
	}
	return strconv.Itoa(status/100) + "xx"
}

// withApp appends the application label's value, when there is one.
func withApp(app string, values ...string) []string {
	if app == "" {
		return values
	}
	return append(values, app)
}

// appLabels caps the distinct values of the application label: the first
// max applications seen keep their names, any later one is "other".
type appLabels struct {
	max  int
	mu   sync.RWMutex
	seen map[string]bool
}

func (a *appLabels) label(app string) string {
	if app == "" {
		app = "unknown"
	}
	a.mu.RLock()
	known, full := a.seen[app], len(a.seen) >= a.max
	a.mu.RUnlock()
	switch {
	case known:
		return app
	case full:
		return "other"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.seen[app] && len(a.seen) >= a.max {
		return "other"
	}
	a.seen[app] = true
	return app
}

// snapshotCollector reads the bound Server's store and router when
// Prometheus scrapes: the ledger's queue and counts, the database pools,
// the breakers, the routes left without a usable candidate, and the
// spans of the operator's traces.
type snapshotCollector struct{ m *Metrics }

var (
	descLedgerPending = prometheus.NewDesc("svcgw_ledger_queue_depth",
		"Generations answered and not yet committed to the ledger.", nil, nil)
	descLedgerLimit = prometheus.NewDesc("svcgw_ledger_queue_limit",
		"Queue depth past which the ledger counts as backed up and billable calls are refused.", nil, nil)
	descLedgerCommitted = prometheus.NewDesc("svcgw_ledger_generations_committed_total",
		"Generations committed to the ledger.", nil, nil)
	descLedgerDropped = prometheus.NewDesc("svcgw_ledger_generations_dropped_total",
		"Generations dropped because they can never be stored (each is logged at error level).", nil, nil)
	descLedgerFailing = prometheus.NewDesc("svcgw_ledger_failing",
		"1 while the ledger cannot record (failing, stalled or backed up) and billable calls are refused.", nil, nil)
	descPoolConns = prometheus.NewDesc("svcgw_db_pool_connections",
		"Database connections by pool and state (in_use, idle).", []string{"pool", "state"}, nil)
	descPoolMax = prometheus.NewDesc("svcgw_db_pool_max_connections",
		"The most connections a database pool opens.", []string{"pool"}, nil)
	descPoolWaits = prometheus.NewDesc("svcgw_db_pool_waits_total",
		"Times a query waited for a free connection of the pool.", []string{"pool"}, nil)
	descPoolWait = prometheus.NewDesc("svcgw_db_pool_wait_seconds_total",
		"Time spent waiting for a free connection of the pool.", []string{"pool"}, nil)
	descBreakerOpen = prometheus.NewDesc("svcgw_upstream_breaker_open",
		"1 while the candidate's circuit breaker is open (calls skip it), else 0.", []string{"candidate"}, nil)
	descBreakerFailures = prometheus.NewDesc("svcgw_upstream_consecutive_failures",
		"The candidate's failed calls in a row.", []string{"candidate"}, nil)
	descBlocked = prometheus.NewDesc("svcgw_routes_blocked",
		"Routes (request type × tier) none of whose candidates has a closed breaker.", nil, nil)
	descTraceSpans = prometheus.NewDesc("svcgw_trace_spans_total",
		"Spans ended while tracing is on, by result: exported, dropped_queue_full (the exporter's queue was full: the collector is slow or gone) or dropped_export_failed.", []string{"result"}, nil)
)

func (c snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLedgerPending, descLedgerLimit, descLedgerCommitted, descLedgerDropped,
		descLedgerFailing, descPoolConns, descPoolMax, descPoolWaits, descPoolWait, descBreakerOpen,
		descBreakerFailures, descBlocked, descTraceSpans} {
		ch <- d
	}
}

func (c snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.src.Load()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	ls := s.store.LedgerStats()
	gauge(descLedgerPending, float64(ls.Pending))
	gauge(descLedgerLimit, float64(ls.Limit))
	counter(descLedgerCommitted, float64(ls.Committed))
	counter(descLedgerDropped, float64(ls.Dropped))
	gauge(descLedgerFailing, b2f(ls.Failing))
	for _, p := range s.store.Pools() {
		gauge(descPoolConns, float64(p.InUse), p.Name, "in_use")
		gauge(descPoolConns, float64(p.Idle), p.Name, "idle")
		gauge(descPoolMax, float64(p.MaxOpenConnections), p.Name)
		counter(descPoolWaits, float64(p.WaitCount), p.Name)
		counter(descPoolWait, p.WaitDuration.Seconds(), p.Name)
	}
	router := s.current().router
	for _, b := range router.Breakers() {
		gauge(descBreakerOpen, b2f(b.Open), b.Candidate)
		gauge(descBreakerFailures, float64(b.Failures), b.Candidate)
	}
	gauge(descBlocked, float64(len(router.Blocked())))
	if s.tracer != nil {
		n := s.tracer.Spans()
		counter(descTraceSpans, float64(n.Exported), "exported")
		counter(descTraceSpans, float64(n.QueueFull), "dropped_queue_full")
		counter(descTraceSpans, float64(n.ExportFailed), "dropped_export_failed")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
