package telemetry

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

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

// blockedSender is a collector that never answers until released.
type blockedSender struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *blockedSender) send(ctx context.Context, body []byte) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got++
	e.mu.Unlock()
	return nil
}

func (e *blockedSender) shutdown(context.Context) error { return nil }

// recordingSender keeps what it is sent, decoded.
type recordingSender struct {
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
	err  error
}

func (r *recordingSender) send(_ context.Context, body []byte) error {
	req := new(coltracepb.ExportTraceServiceRequest)
	err := proto.Unmarshal(body, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	r.err = errors.Join(r.err, err)
	return nil
}

func (r *recordingSender) shutdown(context.Context) error { return nil }

// testTracer is a tracer sampling every call into s.
func testTracer(s sender, size, batch int) *Tracer {
	p := newPreamble([]attribute.KeyValue{attribute.String("service.name", "svcgw-test")}, scopeName, "v0")
	return &Tracer{sampler: sdktrace.AlwaysSample(), queue: newQueue(s, p, size, batch, time.Hour, 200*time.Millisecond), limit: DefaultContentLimit}
}

func startTestCall(tr *Tracer, h http.Header) (context.Context, trace.Span) {
	if h == nil {
		h = http.Header{}
	}
	return tr.StartCall(context.Background(), h, OperationChat, "chat", "POST /svc/v1/chat/completions", "req-1")
}

// TestQueue_ADeadCollectorDropsSpansAndNeverWaits: with the collector
// stuck, ending spans never blocks; what does not fit is dropped and
// counted.
func TestQueue_ADeadCollectorDropsSpansAndNeverWaits(t *testing.T) {
	exp := &blockedSender{release: make(chan struct{})}
	tr := testTracer(exp, 8, 4)
	q := tr.queue
	start := time.Now()
	for range 1000 {
		_, sp := startTestCall(tr, nil)
		sp.End()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 spans took %v with the collector stuck", d)
	}
	// At most 8 wait, and at most 8 more are in the stuck export.
	if n := q.queueFull.Load(); n < 1000-8-8 {
		t.Errorf("dropped %d spans, want at least %d", n, 1000-8-8)
	}
	// The batch stuck in the sender fails at its timeout and is counted.
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
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	total := q.queueFull.Load() + q.exportFailed.Load() + q.exported.Load()
	if total != 1000 {
		t.Errorf("exported %d + dropped %d + failed %d = %d, want every one of 1000 spans counted",
			q.exported.Load(), q.queueFull.Load(), q.exportFailed.Load(), total)
	}
}

// TestNew_DeadCollector: a real OTLP sender to an address nothing
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
				_, sp := startTestCall(tr, nil)
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

// TestEncode_IsOTLP: what the queue sends decodes, with the generated
// OTLP types, into the spans the call recorded: ids and parent links
// (the caller's traceparent a remote parent), names, kinds, times,
// attributes of every type, the exception, the status and the resource.
func TestEncode_IsOTLP(t *testing.T) {
	rec := &recordingSender{}
	tr := testTracer(rec, 64, 64)
	h := http.Header{}
	h.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	before := time.Now()
	ctx, call := startTestCall(tr, h)
	temp := 0.5
	tr.Request(call, Call{RequestType: "chat", Tier: "standard", AccountID: "7", KeyID: "k1", App: "app",
		Request: &llm.Request{Model: "svc-fusion", MaxTokens: 64, Temperature: &temp}})
	actx, adm := tr.StartChild(ctx, SpanAdmission)
	_ = actx
	EndChild(adm, call, nil)
	c := &upstream.Candidate{Name: "a/m", Upstream: "vendor-a", Protocol: "openai", Model: "m-1"}
	actx = tr.StartAttempt(ctx, c, 0, false, upstream.OperationChat)
	cause := errors.New("vendor-a: 503 overloaded")
	tr.EndAttempt(actx, &upstream.Attempt{Outcome: upstream.Outcome(llm.KindUpstream), Err: cause, Backoff: 1500 * time.Microsecond})
	actx = tr.StartAttempt(ctx, c, 1, true, upstream.OperationChat)
	tr.EndAttempt(actx, &upstream.Attempt{Outcome: upstream.OutcomeOK})
	tr.Metered(call, Result{ResponseID: "gen-1", Usage: llm.Usage{InputTokens: 12, OutputTokens: 34}, FinishReason: "stop",
		CostMicros: 1500, FirstToken: 2 * time.Millisecond})
	Failed(call, &llm.Error{Kind: llm.KindRateLimited, Message: "slow down", Err: errors.New("tpm")})
	EndCall(call, 429)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.err != nil || len(rec.reqs) != 1 {
		t.Fatalf("%d requests, decoding: %v", len(rec.reqs), rec.err)
	}
	rss := rec.reqs[0].ResourceSpans
	if len(rss) != 1 || len(rss[0].ScopeSpans) != 1 {
		t.Fatalf("resource spans %v", rss)
	}
	if got := attrs(rss[0].Resource.Attributes); got["service.name"] != "svcgw-test" {
		t.Errorf("resource %v", got)
	}
	if sc := rss[0].ScopeSpans[0].Scope; sc.Name != scopeName || sc.Version != "v0" {
		t.Errorf("scope %v", sc)
	}
	byName := map[string][]*tracepb.Span{}
	for _, s := range rss[0].ScopeSpans[0].Spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	callSp, admSp, attempts := one(t, byName, "chat svc-fusion"), one(t, byName, SpanAdmission), byName["chat m-1"]
	if len(attempts) != 2 {
		t.Fatalf("spans %v", byName)
	}
	tid, _ := hex.DecodeString("0af7651916cd43dd8448eb211c80319c")
	parent, _ := hex.DecodeString("b7ad6b7169203331")
	if !bytes.Equal(callSp.TraceId, tid) || !bytes.Equal(callSp.ParentSpanId, parent) ||
		callSp.Kind != tracepb.Span_SPAN_KIND_SERVER || callSp.Flags != 0x301 {
		t.Errorf("call span %v", callSp)
	}
	for _, s := range append([]*tracepb.Span{admSp}, attempts...) {
		if !bytes.Equal(s.TraceId, tid) || !bytes.Equal(s.ParentSpanId, callSp.SpanId) || s.Flags != 0x101 {
			t.Errorf("span %q: trace %x parent %x flags %x, want trace %x parent %x", s.Name, s.TraceId, s.ParentSpanId, s.Flags, tid, callSp.SpanId)
		}
	}
	if admSp.Kind != tracepb.Span_SPAN_KIND_INTERNAL || attempts[0].Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("kinds %v %v", admSp.Kind, attempts[0].Kind)
	}
	if start := int64(callSp.StartTimeUnixNano); start < before.UnixNano() || callSp.EndTimeUnixNano < callSp.StartTimeUnixNano {
		t.Errorf("call span from %d to %d, started before %d", callSp.StartTimeUnixNano, callSp.EndTimeUnixNano, before.UnixNano())
	}
	got := attrs(callSp.Attributes)
	for k, want := range map[string]string{
		attrOperation: "chat", attrRequestModel: "svc-fusion", attrAccount: "7",
		attrMaxTokens: "64", attrTemperature: "0.5", attrStreamed: "false",
		attrInputTokens: "12", attrOutputTokens: "34", attrCost: "0.0015",
		attrFinishReasons: "[stop]", attrStatusCode: "429",
		attrErrorType: "rate_limited", attrRefusal: "slow down",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if n := len(callSp.Attributes); n != len(got) {
		t.Errorf("%d attributes, %d keys: a key twice", n, len(got))
	}
	if callSp.Status.Code != tracepb.Status_STATUS_CODE_ERROR || callSp.Status.Message != "slow down" {
		t.Errorf("call status %v", callSp.Status)
	}
	if len(callSp.Events) != 1 || callSp.Events[0].Name != "exception" ||
		attrs(callSp.Events[0].Attributes)["exception.message"] != "tpm" {
		t.Errorf("call events %v", callSp.Events)
	}
	failed, ok := attempts[0], attempts[1]
	if attrs(failed.Attributes)[attrAttempt] != "0" {
		failed, ok = ok, failed
	}
	if failed.Status.Code != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(failed.Status.Message, "503") ||
		attrs(failed.Attributes)[attrBackoff] != "1.5" || len(failed.Events) != 1 {
		t.Errorf("failed attempt %v", failed)
	}
	if ok.Status != nil || attrs(ok.Attributes)[attrResponseModel] != "m-1" ||
		attrs(ok.Attributes)[attrRetry] != "true" {
		t.Errorf("answering attempt %v", ok)
	}
}

func one(t *testing.T, byName map[string][]*tracepb.Span, name string) *tracepb.Span {
	t.Helper()
	if len(byName[name]) != 1 {
		t.Fatalf("%d spans %q in %v", len(byName[name]), name, byName)
	}
	return byName[name][0]
}

// attrs is kvs by key, each value as text: a string as it is, an array
// in brackets.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = text(kv.Value)
	}
	return m
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var vs []string
		for _, e := range x.ArrayValue.Values {
			vs = append(vs, text(e))
		}
		return "[" + strings.Join(vs, " ") + "]"
	}
	return fmt.Sprintf("%T", v.GetValue())
}

// TestEncode_LongFields: lengths of every size are written right, moved
// where their guess was short.
func TestEncode_LongFields(t *testing.T) {
	rec := &recordingSender{}
	tr := testTracer(rec, 4096, 4096)
	tr.capture, tr.limit = true, 1<<20
	for _, n := range []int{0, 1, 100, 127, 128, 200, 16383, 16384, 70000} {
		_, sp := startTestCall(tr, nil)
		tr.Request(sp, Call{Request: &llm.Request{Model: strings.Repeat("m", n%300),
			Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(strings.Repeat("x", n))}}}}})
		sp.End()
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.err != nil || len(rec.reqs) != 1 {
		t.Fatalf("%d requests, decoding: %v", len(rec.reqs), rec.err)
	}
	spans := rec.reqs[0].ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != 9 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, n := range []int{0, 1, 100, 127, 128, 200, 16383, 16384, 70000} {
		in := attrs(spans[i].Attributes)[attrInputMessages]
		if !strings.Contains(in, `"content":"`+strings.Repeat("x", n)+`"`) && n > 0 {
			t.Errorf("span %d: input messages of %d bytes lost (%d)", i, n, len(in))
		}
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
	tr := testTracer(&recordingSender{}, 8, 8)
	_, sp := startTestCall(tr, nil)
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
	tr := testTracer(&recordingSender{}, 8, 8)
	ctx, call := startTestCall(tr, nil)
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

// TestRelease_SpansSurviveThePool: calls made at once on several
// goroutines, each released by the server as it ends, with a child ended
// after its call (sent alone) now and then: every span is exported once,
// with its own call's attributes, though the calls' allocations go round
// the pool.
func TestRelease_SpansSurviveThePool(t *testing.T) {
	rec := &recordingSender{}
	tr := testTracer(rec, 1<<14, 64)
	const workers, calls = 4, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				id := fmt.Sprintf("req-%d-%d", w, i)
				ctx, call := tr.StartCall(context.Background(), http.Header{}, OperationChat, "chat", "r", id)
				tr.Request(call, Call{KeyID: id, Request: &llm.Request{Model: "m"}})
				_, adm := tr.StartChild(ctx, SpanAdmission)
				EndChild(adm, call, nil)
				actx := tr.StartAttempt(ctx, &upstream.Candidate{Upstream: id, Protocol: "openai", Model: "m"}, 0, false, upstream.OperationChat)
				tr.EndAttempt(actx, &upstream.Attempt{Outcome: upstream.OutcomeOK})
				_, late := tr.StartChild(ctx, SpanLedger)
				if i%3 != 0 {
					late.End()
				}
				EndCall(call, 200)
				if i%3 == 0 {
					late.End() // after its call: it goes on its own
				}
				Release(call)
			}
		})
	}
	wg.Wait()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	type trace struct {
		id    string
		spans map[string]*tracepb.Span
	}
	traces := map[string]*trace{}
	n := 0
	for _, req := range rec.reqs {
		for _, s := range req.ResourceSpans[0].ScopeSpans[0].Spans {
			n++
			tid := hex.EncodeToString(s.TraceId)
			tc := traces[tid]
			if tc == nil {
				tc = &trace{spans: map[string]*tracepb.Span{}}
				traces[tid] = tc
			}
			name := s.Name + " " + s.Kind.String()
			if tc.spans[name] != nil {
				t.Fatalf("trace %s has two %q spans", tid, name)
			}
			tc.spans[name] = s
		}
	}
	if n != workers*calls*4 || len(traces) != workers*calls {
		t.Fatalf("%d spans in %d traces, want %d in %d", n, len(traces), workers*calls*4, workers*calls)
	}
	if got := tr.Spans(); got.Exported != uint64(n) || got.QueueFull+got.ExportFailed != 0 {
		t.Errorf("counts %+v, want %d exported", got, n)
	}
	for tid, tc := range traces {
		call := tc.spans["chat m SPAN_KIND_SERVER"]
		if call == nil || len(tc.spans) != 4 {
			t.Fatalf("trace %s: spans %v", tid, tc.spans)
		}
		a := attrs(call.Attributes)
		id := a[attrRequestID]
		if a[attrKeyID] != id || len(call.Attributes) != len(a) {
			t.Errorf("trace %s: call span %v", tid, a)
		}
		for name, s := range tc.spans {
			if s != call && !bytes.Equal(s.ParentSpanId, call.SpanId) {
				t.Errorf("trace %s: %s's parent %x, want the call %x", tid, name, s.ParentSpanId, call.SpanId)
			}
		}
		if up := attrs(tc.spans["chat m SPAN_KIND_CLIENT"].Attributes); up[attrUpstream] != id {
			t.Errorf("trace %s: call %s, attempt %v", tid, id, up)
		}
	}
}

// TestExport_ALargeQueueGoesInBatches: spans waiting in the thousands go
// to a real OTLP/HTTP receiver in several requests of at most BatchSize
// spans each, every one a valid request with the resource, and none of
// the spans lost or sent twice; the children a call brings do not carry
// a request past the batch size.
func TestExport_ALargeQueueGoesInBatches(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	ids := map[string]int{}
	var bad error
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-hold
		body, err := io.ReadAll(r.Body)
		req := new(coltracepb.ExportTraceServiceRequest)
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		mu.Lock()
		defer mu.Unlock()
		if err == nil && (len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 ||
			attrs(req.ResourceSpans[0].Resource.GetAttributes())["service.name"] != "svcgw-batches") {
			err = fmt.Errorf("request of %d resources: not svcgw's one resource and scope", len(req.ResourceSpans))
		}
		if err != nil {
			bad = errors.Join(bad, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		spans := req.ResourceSpans[0].ScopeSpans[0].Spans
		sizes = append(sizes, len(spans))
		for _, s := range spans {
			ids[hex.EncodeToString(s.SpanId)]++
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	const batch = 100
	o, _, err := Resolve(Options{Endpoint: srv.URL, Protocol: ProtocolHTTPProtobuf, ServiceName: "svcgw-batches",
		QueueSize: 1 << 14, BatchSize: batch, BatchDelay: time.Hour}, env())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// 3,000 calls of a call span and two children each (the batches'
	// ends fall inside a call's spans), made while the receiver holds
	// the first request: thousands of spans wait behind it.
	const calls = 3000
	for range calls {
		ctx, call := startTestCall(tr, nil)
		_, adm := tr.StartChild(ctx, SpanAdmission)
		EndChild(adm, call, nil)
		_, led := tr.StartChild(ctx, SpanLedger)
		EndChild(led, call, nil)
		EndCall(call, 200)
		Release(call)
	}
	close(hold)
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = tr.Shutdown(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		t.Fatal(bad)
	}
	total := 0
	for _, n := range sizes {
		total += n
		if n > batch {
			t.Errorf("a request of %d spans, over the batch size %d", n, batch)
		}
	}
	if want := 3 * calls; total != want || len(ids) != want {
		t.Errorf("%d spans in %d requests, %d distinct, want %d", total, len(sizes), len(ids), want)
	}
	if len(sizes) < 3*calls/batch {
		t.Errorf("%d requests, want at least %d", len(sizes), 3*calls/batch)
	}
	if n := tr.Spans(); n.Exported != 3*calls || n.QueueFull+n.ExportFailed != 0 {
		t.Errorf("spans %+v, want %d exported", n, 3*calls)
	}
}

// TestResolve_Timeout: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT wins over
// OTEL_EXPORTER_OTLP_TIMEOUT, which wins over OTEL_BSP_EXPORT_TIMEOUT; the
// file's value over all; a bad value is an error.
func TestResolve_Timeout(t *testing.T) {
	ep := "OTEL_EXPORTER_OTLP_ENDPOINT"
	for _, c := range []struct {
		o    Options
		env  []string
		want time.Duration
	}{
		{env: []string{ep, "http://c:4317"}, want: 10 * time.Second},
		{env: []string{ep, "http://c:4317", "OTEL_BSP_EXPORT_TIMEOUT", "3000"}, want: 3 * time.Second},
		{env: []string{ep, "http://c:4317", "OTEL_BSP_EXPORT_TIMEOUT", "3000", "OTEL_EXPORTER_OTLP_TIMEOUT", "2000"}, want: 2 * time.Second},
		{env: []string{ep, "http://c:4317", "OTEL_EXPORTER_OTLP_TIMEOUT", "2000", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500"}, want: 1500 * time.Millisecond},
		{o: Options{ExportTimeout: time.Second}, env: []string{ep, "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500"}, want: time.Second},
	} {
		o, on, err := Resolve(c.o, env(c.env...))
		if err != nil || !on || o.ExportTimeout != c.want {
			t.Errorf("%v: timeout %v (on %v, %v), want %v", c.env, o.ExportTimeout, on, err, c.want)
		}
	}
	if _, _, err := Resolve(Options{}, env(ep, "http://c:4317", "OTEL_EXPORTER_OTLP_TIMEOUT", "ten")); err == nil {
		t.Error("OTEL_EXPORTER_OTLP_TIMEOUT=ten accepted")
	}
}
