package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/jaegertest"
)

// TestServe_TracesFromTheEnvironmentAndFlushesAtShutdown: serve with only
// the OpenTelemetry environment set traces its calls into a real Jaeger,
// and the spans still queued at SIGTERM reach it before serve exits (the
// queue's own delay is ten minutes here, so only the shutdown's flush can
// have sent them).
func TestServe_TracesFromTheEnvironmentAndFlushesAtShutdown(t *testing.T) {
	j := jaegertest.Start(t)
	for _, proto := range []struct{ name, endpoint string }{
		{"grpc", j.OTLPGRPC}, {"http/protobuf", j.OTLPHTTP},
	} {
		t.Run(proto.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", proto.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto.name)
			t.Setenv("OTEL_SERVICE_NAME", "svcgw-cli-test")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
			db := newDB(t)
			code, key, stderr := run(t, db, "keys", "create", "--account", "acme", "--name", "ci")
			if code != 0 {
				t.Fatal(stderr)
			}
			if code, _, stderr := run(t, db, "credits", "add", "--account", "acme", "5"); code != 0 {
				t.Fatal(stderr)
			}
			key = strings.TrimSpace(key)

			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			logs := &syncBuffer{}
			done := make(chan int, 1)
			go func() { done <- Run(ctx, []string{"--db", db, "serve", "--addr", addr}, io.Discard, logs) }()
			waitHealthy(t, addr, logs)

			traceID := fmt.Sprintf("%032x", 0x5e12e+len(proto.name))
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Traceparent", "00-"+traceID+"-00000000000000bb-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if _, err := j.Trace(context.Background(), traceID); err == nil {
				t.Fatal("the trace was exported before shutdown: the test would not see the flush")
			}

			cancel() // as SIGTERM
			if code := <-done; code != 0 {
				t.Fatalf("serve exited %d: %s", code, logs.String())
			}
			if !regexp.MustCompile(`tracing on.*protocol=`+regexp.QuoteMeta(proto.name)).MatchString(logs.String()) ||
				!strings.Contains(logs.String(), "shutdown: spans flushed") {
				t.Errorf("log:\n%s", logs.String())
			}
			tr := j.WaitTrace(t, traceID, 4, 10*time.Second) // the call, admission, the attempt, the ledger
			for _, p := range tr.Processes {
				if p.ServiceName != "svcgw-cli-test" {
					t.Errorf("service %q", p.ServiceName)
				}
			}
			if !regexp.MustCompile(`trace_id=` + traceID).MatchString(logs.String()) {
				t.Errorf("the access line does not name the trace:\n%s", logs.String())
			}
		})
	}
}

// TestServe_TelemetryMistakesStopTheStart: with tracing on, a setting it
// cannot use refuses the start, naming it.
func TestServe_TelemetryMistakesStopTheStart(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "svcgw.yaml")
	doc := "upstreams:\n  fx:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [fx/m]\ntelemetry:\n  endpoint: http://127.0.0.1:4317\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "sometimes")
	code, _, stderr := run(t, newDB(t), "serve", "--addr", "127.0.0.1:0", "--config", cfg)
	if code == 0 || !strings.Contains(stderr, `sampler "sometimes"`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func waitHealthy(t *testing.T, addr string, logs *syncBuffer) {
	t.Helper()
	for range 400 {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("serve did not come up: %s", logs.String())
}
