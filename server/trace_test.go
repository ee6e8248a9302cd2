package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// TestTracing_ADeadCollectorCostsSpansNotCalls: with the collector gone,
// calls answer as ever, the access line still names each trace, and
// /metrics counts the spans dropped.
func TestTracing_ADeadCollectorCostsSpansNotCalls(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	o, on, err := telemetry.Resolve(telemetry.Options{Endpoint: dead, Sampler: "always_on", QueueSize: 8, BatchSize: 4,
		BatchDelay: 10 * time.Millisecond, ExportTimeout: 50 * time.Millisecond}, func(string) string { return "" })
	if err != nil || !on {
		t.Fatalf("on=%v err=%v", on, err)
	}
	tr, err := telemetry.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	fx := fixture.New(fixture.Options{})
	router := upstream.NewRouterWithOptions(upstream.RouterOptions{Tracer: tr},
		[]upstream.Candidate{{Name: "fixture", Backend: fx, Upstream: "fixture", Protocol: "fixture", Model: "fixture"}})
	var logs syncBuffer
	gw := newMetricsGateway(t, MetricsOptions{}, func(opt *Options) {
		opt.Router, opt.Tracer = router, tr
		opt.Logger = newTextLogger(&logs)
	})
	for range 50 {
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if n := strings.Count(logs.String(), "trace_id="); n != 50 {
		t.Errorf("%d access lines name a trace, want 50", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := gw.scrape(t)
		dropped := m.value("svcgw_trace_spans_total", "result", "dropped_queue_full") +
			m.value("svcgw_trace_spans_total", "result", "dropped_export_failed")
		if dropped > 0 && m.value("svcgw_trace_spans_total", "result", "exported") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("svcgw_trace_spans_total: exported %v, dropped %v; want drops counted and nothing exported",
				m.value("svcgw_trace_spans_total", "result", "exported"), dropped)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTracing_OffWritesNoTraceID: without a tracer the access line is as
// it always was.
func TestTracing_OffWritesNoTraceID(t *testing.T) {
	var logs syncBuffer
	gw := newTestGateway(t, func(opt *Options) { opt.Logger = newTextLogger(&logs) })
	resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody,
		"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if strings.Contains(logs.String(), "trace_id") || !strings.Contains(logs.String(), "request_id=") {
		t.Errorf("access line: %s", logs.String())
	}
}

func newTextLogger(w *syncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
