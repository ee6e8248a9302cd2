package telemetry

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestResolve(t *testing.T) {
	t.Run("off without an endpoint", func(t *testing.T) {
		_, on, err := Resolve(Options{}, env("OTEL_SERVICE_NAME", "x", "OTEL_TRACES_SAMPLER", "nonsense"))
		if on || err != nil {
			t.Fatalf("on=%v err=%v, want off and no error", on, err)
		}
	})
	t.Run("on from the environment", func(t *testing.T) {
		o, on, err := Resolve(Options{}, env(
			"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318",
			"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
			"OTEL_SERVICE_NAME", "gw",
			"OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0.25",
			"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod,team=ml%20ops",
			"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true",
		))
		if !on || err != nil {
			t.Fatalf("on=%v err=%v", on, err)
		}
		if o.Endpoint != "http://collector:4318" || o.Protocol != ProtocolHTTPProtobuf || o.ServiceName != "gw" ||
			o.Sampler != "traceidratio" || o.SamplerArg != "0.25" || !o.CaptureContent ||
			o.ResourceAttributes["team"] != "ml ops" || o.ResourceAttributes["deployment.environment.name"] != "prod" {
			t.Errorf("resolved %+v", o)
		}
	})
	t.Run("the file wins over the environment", func(t *testing.T) {
		o, on, err := Resolve(Options{TracesEndpoint: "http://file:4317", ServiceName: "file", ResourceAttributes: map[string]string{"team": "file"}},
			env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://env:4317", "OTEL_SERVICE_NAME", "env", "OTEL_RESOURCE_ATTRIBUTES", "team=env,zone=a"))
		if !on || err != nil {
			t.Fatalf("on=%v err=%v", on, err)
		}
		if o.TracesEndpoint != "http://file:4317" || o.ServiceName != "file" || o.ResourceAttributes["team"] != "file" || o.ResourceAttributes["zone"] != "a" {
			t.Errorf("resolved %+v", o)
		}
		if o.Protocol != ProtocolGRPC || o.QueueSize != 2048 || o.BatchSize != 512 || o.ContentLimit != DefaultContentLimit {
			t.Errorf("defaults %+v", o)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		for _, e := range []func(string) string{
			env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317", "OTEL_SDK_DISABLED", "true"),
			env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317", "OTEL_TRACES_EXPORTER", "none"),
		} {
			if _, on, _ := Resolve(Options{}, e); on {
				t.Error("on, want off")
			}
		}
	})
	t.Run("mistakes are errors once on", func(t *testing.T) {
		_, _, err := Resolve(Options{}, env("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "OTEL_TRACES_SAMPLER", "sometimes", "OTEL_BSP_MAX_QUEUE_SIZE", "-1"))
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"collector:4317", "http/json", "sometimes", "OTEL_BSP_MAX_QUEUE_SIZE"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})
}

func TestNewSampler(t *testing.T) {
	for _, name := range []string{"", "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"} {
		if _, err := NewSampler(name, ""); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if _, err := NewSampler("traceidratio", "2"); err == nil {
		t.Error("ratio 2 accepted")
	}
}

// blockedExporter is a collector that never answers until released.
type blockedExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *blockedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *blockedExporter) Shutdown(context.Context) error { return nil }

// TestQueue_ADeadCollectorDropsSpansAndNeverWaits: with the exporter stuck,
// ending spans never blocks; what does not fit is dropped and counted.
func TestQueue_ADeadCollectorDropsSpansAndNeverWaits(t *testing.T) {
	exp := &blockedExporter{release: make(chan struct{})}
	q := newQueue(exp, 8, 4, time.Hour, 200*time.Millisecond)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("test")
	start := time.Now()
	for range 1000 {
		_, sp := tr.Start(context.Background(), "call")
		sp.End()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 spans took %v with the collector stuck", d)
	}
	if n := q.queueFull.Load(); n < 1000-8-4 {
		t.Errorf("dropped %d spans, want at least %d", n, 1000-8-4)
	}
	// The batch stuck in the exporter fails at its timeout and is counted.
	deadline := time.Now().Add(5 * time.Second)
	for q.exportFailed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if q.exportFailed.Load() == 0 {
		t.Error("the failed export was not counted")
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	total := q.queueFull.Load() + q.exportFailed.Load() + q.exported.Load()
	if total != 1000 {
		t.Errorf("exported %d + dropped %d + failed %d = %d, want every one of 1000 spans counted",
			q.exported.Load(), q.queueFull.Load(), q.exportFailed.Load(), total)
	}
}

// TestNew_DeadCollector: a real OTLP exporter to an address nothing
// listens on costs the calls nothing and counts what it lost.
func TestNew_DeadCollector(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for _, proto := range []string{ProtocolGRPC, ProtocolHTTPProtobuf} {
		t.Run(proto, func(t *testing.T) {
			o, _, err := Resolve(Options{Endpoint: "http://" + addr, Protocol: proto, QueueSize: 16, BatchSize: 8,
				BatchDelay: 10 * time.Millisecond, ExportTimeout: 100 * time.Millisecond}, env())
			if err != nil {
				t.Fatal(err)
			}
			tr, err := New(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for range 200 {
				_, sp := tr.tracer.Start(context.Background(), "chat m", trace.WithSpanKind(trace.SpanKindServer))
				sp.End()
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("200 spans took %v", d)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = tr.Shutdown(ctx)
			n := tr.Spans()
			if n.Exported != 0 || n.QueueFull+n.ExportFailed != 200 {
				t.Errorf("spans %+v, want all 200 dropped and counted", n)
			}
		})
	}
}

func TestBounded(t *testing.T) {
	tr := &Tracer{capture: true, limit: 40}
	req := &llm.Request{Model: "m", System: []llm.Part{llm.TextPart("be brief")},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(strings.Repeat("é", 100))}}}}
	s := tr.inputMessages(req)
	body, marker, ok := strings.Cut(s, "…[truncated")
	if !ok || len(body) > 40 || !strings.HasPrefix(s, `[{"role":"system"`) || marker != " at 40 bytes]" {
		t.Errorf("inputMessages = %q", s)
	}
	if !strings.HasPrefix(strings.ToValidUTF8(body, "?"), body) {
		t.Errorf("cut inside a rune: %q", body)
	}
	c := tr.NewCapture()
	c.Add(strings.Repeat("ab", 30))
	c.Add("more")
	if c.b.Len() != 40 {
		t.Errorf("capture kept %d bytes, want 40", c.b.Len())
	}
	if (&Tracer{}).NewCapture() != nil {
		t.Error("a capture without content capture on")
	}
}

func TestTraceparent(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	_, sp := tp.Tracer("t").Start(context.Background(), "x")
	got := traceparent(sp.SpanContext())
	want := "00-" + sp.SpanContext().TraceID().String() + "-" + sp.SpanContext().SpanID().String() + "-01"
	if got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
}

// TestStartAttempt_TraceparentOnlyWhereAllowed: an attempt's context
// carries its traceparent for the upstream request only when the
// candidate's upstream allows trace context.
func TestStartAttempt_TraceparentOnlyWhereAllowed(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	tr := &Tracer{provider: tp, tracer: tp.Tracer("t")}
	ctx, call := tr.tracer.Start(context.Background(), "chat m")
	defer call.End()
	closed := tr.StartAttempt(ctx, &upstream.Candidate{Name: "a/m", Upstream: "a", Protocol: "openai", Model: "m"}, 0, false, upstream.OperationChat)
	if got := upstream.Traceparent(closed); got != "" {
		t.Errorf("traceparent %q for an upstream without trace_context", got)
	}
	open := tr.StartAttempt(ctx, &upstream.Candidate{Name: "b/m", Upstream: "b", Protocol: "openai", Model: "m", TraceContext: true}, 1, false, upstream.OperationChat)
	sc := trace.SpanContextFromContext(open)
	want := "00-" + call.SpanContext().TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := upstream.Traceparent(open); got != want {
		t.Errorf("traceparent %q, want the attempt's span %q", got, want)
	}
}
