// Package jaegertest gives tests a real tracing backend: a Jaeger
// (github.com/jaegertracing/jaeger/cmd/jaeger, in-memory storage) started
// by the test binary on loopback ports of its own, with its OTLP receiver
// (gRPC and HTTP) and its query API.
//
// The binary is the one SVCGW_JAEGER names, else the one scripts/test
// builds into the user's cache directory (Binary), else jaeger on the
// PATH. Without one, tests that ask for it skip with a message saying how
// to get it; with SVCGW_REQUIRE_JAEGER=1 (set by .ci/run) they fail
// instead. The process is started with a parent-death signal, so it never
// outlives a test binary that is killed, and stopped when the test ends.
//
// jaegertest imports nothing of svcgw's. It is imported by tests only.
package jaegertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Version is the Jaeger release scripts/test builds.
const Version = "v1.76.0"

// Environment variables.
const (
	EnvBinary  = "SVCGW_JAEGER"         // the jaeger binary to run
	EnvRequire = "SVCGW_REQUIRE_JAEGER" // 1: a missing Jaeger fails the test
)

// Binary is where scripts/test builds Jaeger: under the user's cache
// directory, by version.
func Binary() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "svcgw", "jaeger-"+Version, "jaeger")
}

// find returns the jaeger binary to run, or why there is none.
func find() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	if p := Binary(); fileExists(p) {
		return p, nil
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no Jaeger binary: scripts/test builds one into %s (or set %s)", Binary(), EnvBinary)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLPGRPC and OTLPHTTP are the receiver's base URLs
	// (OTEL_EXPORTER_OTLP_ENDPOINT for each protocol); Query is the
	// query service's (the UI and its /api).
	OTLPGRPC, OTLPHTTP, Query string
}

// Start starts a Jaeger for t, stopped when t ends. Without one it skips
// t (fails it under SVCGW_REQUIRE_JAEGER=1).
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin, err := find()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("Jaeger is required (%s=1): %v", EnvRequire, err)
		}
		t.Skipf("skipping: %v", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(configTemplate, ports[0], ports[1], ports[2], ports[3])), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	logf, err := os.Create(filepath.Join(dir, "jaeger.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start jaeger: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	j := &Jaeger{
		OTLPGRPC: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		Query:    fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
	}
	// Ready once the query API answers and the receiver accepts.
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("jaeger exited: %v\n%s", err, log)
		default:
		}
		if j.ready() {
			return j
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("jaeger did not become ready in 60s\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (j *Jaeger) ready() bool {
	resp, err := http.Get(j.Query + "/api/services")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(j.OTLPGRPC, "http://"), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// configTemplate is an all-in-one Jaeger on loopback: OTLP gRPC and HTTP,
// in-memory storage, the query service (HTTP and gRPC), no telemetry of
// its own listening anywhere.
const configTemplate = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%[3]d
    grpc:
      endpoint: 127.0.0.1:%[4]d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%[1]d
      http:
        endpoint: 127.0.0.1:%[2]d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// freePorts returns n loopback ports free now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Trace is one trace as the query API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Trace.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []KeyValue  `json:"tags"`
	ProcessID     string      `json:"processID"`
}

// Reference links a span to another (CHILD_OF: its parent).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a span tag.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the resource a span came from.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Tag returns the value of the span's tag key, and whether it has one.
func (s Span) Tag(key string) (any, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Parent is the span id of s's parent, or "".
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// ErrNotFound is Trace's error while the trace is not (yet) stored.
var ErrNotFound = errors.New("trace not found")

// Trace fetches one trace by its id.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (*Trace, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+"/api/traces/"+traceID, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, ErrNotFound
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: %s", traceID, resp.Status)
	}
	var body struct {
		Data []Trace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decode trace: %w", err)
	}
	if len(body.Data) == 0 {
		return nil, ErrNotFound
	}
	return &body.Data[0], nil
}

// WaitTrace polls for a trace until it holds at least spans spans, or
// the timeout passes.
func (j *Jaeger) WaitTrace(t testing.TB, traceID string, spans int, timeout time.Duration) *Trace {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		tr, err := j.Trace(context.Background(), traceID)
		if err == nil && len(tr.Spans) >= spans {
			return tr
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			n := 0
			if tr != nil {
				n = len(tr.Spans)
			}
			t.Fatalf("trace %s: %d spans after %v, want at least %d (err: %v)", traceID, n, timeout, spans, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
