package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/jaegertest"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
	"github.com/svcgw/svcgw/upstream/openai"
)

// promptMarker is in every prompt the tracing tests send: the spans must
// not hold it unless content capture is on.
const promptMarker = "PROMPT-MARKER-7d1f"

// failingUpstream is an OpenAI-compatible upstream that answers every call
// 503, and keeps the traceparent each request carried.
type failingUpstream struct {
	*httptest.Server
	mu           sync.Mutex
	traceparents []string
}

func newFailingUpstream(t *testing.T) *failingUpstream {
	f := &failingUpstream{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.traceparents = append(f.traceparents, r.Header.Get("Traceparent"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"overloaded upstream-secret-name","type":"server_error"}}`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *failingUpstream) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.traceparents...)
}

// tracedGateway is a test gateway traced into j: every route tries a
// failing upstream (openai protocol, trace context allowed), retries it
// once, then falls back to the fixture.
func tracedGateway(t *testing.T, j *jaegertest.Jaeger, capture bool, logs io.Writer) (*testGateway, *telemetry.Tracer, *failingUpstream) {
	t.Helper()
	o, on, err := telemetry.Resolve(telemetry.Options{
		Endpoint: j.OTLPGRPC, ServiceName: "svcgw-test", Sampler: "always_on",
		CaptureContent: capture, ContentLimit: 128, BatchDelay: 50 * time.Millisecond,
	}, func(string) string { return "" })
	if err != nil || !on {
		t.Fatalf("resolve: on=%v err=%v", on, err)
	}
	tr, err := telemetry.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tracedGatewayWith(t, tr, logs)
}

// tracedGatewayWith is tracedGateway's gateway, traced by tr.
func tracedGatewayWith(t *testing.T, tr *telemetry.Tracer, logs io.Writer) (*testGateway, *telemetry.Tracer, *failingUpstream) {
	t.Helper()
	bad := newFailingUpstream(t)
	fx := fixture.New(fixture.Options{})
	router := upstream.NewRouterWithOptions(upstream.RouterOptions{
		MaxRetries: 1, BaseBackoff: time.Millisecond, BreakerThreshold: 1 << 20, Tracer: tr,
	}, []upstream.Candidate{
		{Name: "flaky/backend-x", Upstream: "flaky", Protocol: "openai", Model: "backend-x", TraceContext: true,
			Backend: openai.New(upstream.HTTPOptions{BaseURL: bad.URL + "/v1", Model: "backend-x"})},
		{Name: "fixture/fixture-model", Upstream: "fixture", Protocol: "fixture", Model: "fixture-model",
			Backend: fx, Limits: fx.Limits()},
	})
	gw := newTestGateway(t, func(opt *Options) {
		opt.Router, opt.Tracer = router, tr
		opt.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	return gw, tr, bad
}

// TestTracing_IntoJaeger sends calls on every surface, streamed and not,
// through a gateway that traces into a real Jaeger, and reads the traces
// back through Jaeger's query API.
func TestTracing_IntoJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	var logs syncBuffer
	gw, tr, bad := tracedGateway(t, j, false, &logs)
	broke, _ := gw.newKey(t, "broke", "")

	calls := []struct {
		name, path, body string
		stream           bool
	}{
		{"chat", "/svc/v1/chat/completions", `{"model":"caller-model","max_tokens":32,"temperature":0.5,"top_p":0.9,"messages":[{"role":"user","content":"` + promptMarker + `"}]}`, false},
		{"chat stream", "/svc/v1/chat/completions", `{"model":"caller-model","stream":true,"messages":[{"role":"user","content":"` + promptMarker + `"}]}`, true},
		{"messages", "/svc/v1/messages", `{"model":"caller-model","max_tokens":32,"messages":[{"role":"user","content":"` + promptMarker + `"}]}`, false},
		{"messages stream", "/svc/v1/messages", `{"model":"caller-model","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"` + promptMarker + `"}]}`, true},
		{"gencontent", "/svc/v1beta/models/caller-model:generateContent", `{"contents":[{"role":"user","parts":[{"text":"` + promptMarker + `"}]}]}`, false},
		{"gencontent stream", "/svc/v1beta/models/caller-model:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"` + promptMarker + `"}]}]}`, true},
	}
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			// The caller's own trace: the call's span must join it.
			traceID := fmt.Sprintf("%032x", 0xabc000+i)
			parent := fmt.Sprintf("%016x", 0xdef000+i)
			resp, body := gw.do(t, http.MethodPost, c.path, c.body, "Traceparent", "00-"+traceID+"-"+parent+"-01")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			callerSaw(t, resp, body)

			trace := j.WaitTrace(t, traceID, 6, 20*time.Second)
			call := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == "chat caller-model" })
			if call.Parent() != parent {
				t.Errorf("call span's parent = %q, want the caller's span %s", call.Parent(), parent)
			}
			wantTags(t, call, map[string]any{
				"gen_ai.operation.name": "chat",
				"gen_ai.request.model":  "caller-model",
				"svcgw.streamed":        c.stream,
				"svcgw.key_id":          gw.KeyID,
				"span.kind":             "server",
			})
			for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.id",
				"gen_ai.response.finish_reasons", "svcgw.cost_usd", "svcgw.time_to_first_token_ms", "svcgw.request_type",
				"svcgw.tier", "svcgw.account_id", "svcgw.application", "svcgw.surface",
				"gen_ai.usage.cache_read.input_tokens", "http.response.status_code"} {
				if _, ok := call.Tag(k); !ok {
					t.Errorf("call span has no %s", k)
				}
			}
			if c.name == "chat" {
				wantTags(t, call, map[string]any{"gen_ai.request.max_tokens": float64(32), "gen_ai.request.temperature": 0.5, "gen_ai.request.top_p": 0.9})
			}
			if out, _ := call.Tag("gen_ai.usage.output_tokens"); out.(float64) <= 0 {
				t.Errorf("output tokens %v", out)
			}

			// Three attempts, children of the call: the failing upstream,
			// its retry, and the fallback that answered.
			var attempts []jaegertest.Span
			for _, s := range trace.Spans {
				if _, ok := s.Tag("svcgw.attempt"); ok {
					attempts = append(attempts, s)
				}
			}
			if len(attempts) != 3 {
				t.Fatalf("%d attempt spans, want 3", len(attempts))
			}
			byN := map[float64]jaegertest.Span{}
			for _, a := range attempts {
				if a.Parent() != call.SpanID {
					t.Errorf("attempt %s: parent %s, want the call %s", a.OperationName, a.Parent(), call.SpanID)
				}
				n, _ := a.Tag("svcgw.attempt")
				byN[n.(float64)] = a
			}
			wantTags(t, byN[0], map[string]any{"svcgw.upstream": "flaky", "svcgw.upstream.protocol": "openai",
				"gen_ai.request.model": "backend-x", "svcgw.retry": false, "error.type": "overloaded", "otel.status_code": "ERROR", "span.kind": "client"})
			wantTags(t, byN[1], map[string]any{"svcgw.upstream": "flaky", "svcgw.retry": true, "error.type": "overloaded"})
			wantTags(t, byN[2], map[string]any{"svcgw.upstream": "fixture", "svcgw.fallback": true, "svcgw.outcome": "ok",
				"gen_ai.response.model": "fixture-model", "gen_ai.provider.name": "svcgw.fixture"})

			for _, name := range []string{telemetry.SpanAdmission, telemetry.SpanLedger} {
				s := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == name })
				if s.Parent() != call.SpanID {
					t.Errorf("%s: parent %s, want the call %s", name, s.Parent(), call.SpanID)
				}
			}
			noContent(t, trace)
		})
	}

	t.Run("the access line names the trace", func(t *testing.T) {
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", calls[0].body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		id := requestTraceID(t, logs.String(), resp.Header.Get("X-Request-Id"))
		trace := j.WaitTrace(t, id, 6, 20*time.Second)
		call := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == "chat caller-model" })
		if call.Parent() != "" {
			t.Errorf("a call without traceparent begins its trace; parent %q", call.Parent())
		}
	})

	t.Run("402 is a span with its reason", func(t *testing.T) {
		resp, body := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", calls[0].body, "Authorization", "Bearer "+broke)
		if resp.StatusCode != http.StatusPaymentRequired {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		callerSaw(t, resp, body)
		id := requestTraceID(t, logs.String(), resp.Header.Get("X-Request-Id"))
		trace := j.WaitTrace(t, id, 2, 20*time.Second)
		call := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == "chat caller-model" })
		wantTags(t, call, map[string]any{"error.type": "payment_required", "http.response.status_code": float64(402), "otel.status_code": "ERROR"})
		if r, _ := call.Tag("svcgw.refusal"); r == nil || !strings.Contains(r.(string), "credit") && !strings.Contains(r.(string), "balance") {
			t.Errorf("refusal reason %v", r)
		}
		adm := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == telemetry.SpanAdmission })
		wantTags(t, adm, map[string]any{"error.type": "payment_required"})
		for _, s := range trace.Spans {
			if _, ok := s.Tag("svcgw.attempt"); ok {
				t.Errorf("a refused call reached an upstream: %s", s.OperationName)
			}
		}
	})

	// Every request to the failing upstream carried the traceparent of
	// its attempt's span, which the configuration allowed.
	tps := bad.seen()
	if len(tps) == 0 {
		t.Fatal("the failing upstream was never called")
	}
	tpRE := regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)
	for _, tp := range tps {
		if !tpRE.MatchString(tp) {
			t.Errorf("upstream request traceparent %q", tp)
		}
	}
	if n := tr.Spans(); n.Exported == 0 || n.QueueFull != 0 || n.ExportFailed != 0 {
		t.Errorf("spans %+v", n)
	}
}

// TestTracing_ContentOnlyWhenAsked: with content capture on, the prompt
// and the completion are on the call's span, cut to the limit.
func TestTracing_ContentOnlyWhenAsked(t *testing.T) {
	j := jaegertest.Start(t)
	gw, _, _ := tracedGateway(t, j, true, io.Discard)
	long := promptMarker + strings.Repeat("x", 500)
	for _, stream := range []bool{false, true} {
		traceID := fmt.Sprintf("%032x", 0xc0ffee)
		if stream {
			traceID = fmt.Sprintf("%032x", 0xc0ffef)
		}
		body := fmt.Sprintf(`{"model":"caller-model","stream":%v,"messages":[{"role":"user","content":%q}]}`, stream, long)
		resp, b := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", body, "Traceparent", "00-"+traceID+"-00000000000000aa-01")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		trace := j.WaitTrace(t, traceID, 6, 20*time.Second)
		call := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == "chat caller-model" })
		in, _ := call.Tag("gen_ai.input.messages")
		s, _ := in.(string)
		if !strings.Contains(s, promptMarker) || strings.Contains(s, long) || !strings.Contains(s, "truncated at 128 bytes") {
			t.Errorf("stream %v: gen_ai.input.messages = %q, want the prompt cut to 128 bytes", stream, s)
		}
		if out, ok := call.Tag("gen_ai.output.messages"); !ok || !strings.Contains(out.(string), "assistant") {
			t.Errorf("stream %v: gen_ai.output.messages = %v", stream, out)
		}
	}
}

// callerSaw checks what the caller received: no backend, upstream or
// candidate name and no trace context, in the headers or the body.
func callerSaw(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	var all strings.Builder
	for k, vs := range resp.Header {
		if strings.EqualFold(k, "Traceparent") || strings.EqualFold(k, "Tracestate") {
			t.Errorf("the caller got a %s header", k)
		}
		all.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	all.Write(body)
	for _, name := range []string{"flaky", "backend-x", "fixture", "upstream-secret-name", "svcgw.attempt", "gen_ai"} {
		if strings.Contains(all.String(), name) {
			t.Errorf("the caller saw %q:\n%s", name, all.String())
		}
	}
}

// noContent checks that no span of trace holds the prompt.
func noContent(t *testing.T, trace *jaegertest.Trace) {
	t.Helper()
	for _, s := range trace.Spans {
		for _, kv := range s.Tags {
			if strings.Contains(fmt.Sprint(kv.Value), promptMarker) {
				t.Errorf("span %s holds the prompt in %s", s.OperationName, kv.Key)
			}
		}
	}
}

// requestTraceID is the trace_id of the access line of request id.
func requestTraceID(t *testing.T, logs, id string) string {
	t.Helper()
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "request_id="+id) {
			if m := regexp.MustCompile(`trace_id=([0-9a-f]{32})`).FindStringSubmatch(line); m != nil {
				return m[1]
			}
			t.Fatalf("access line without trace_id: %s", line)
		}
	}
	t.Fatalf("no access line for %s in:\n%s", id, logs)
	return ""
}

func only(t *testing.T, trace *jaegertest.Trace, match func(jaegertest.Span) bool) jaegertest.Span {
	t.Helper()
	var found []jaegertest.Span
	for _, s := range trace.Spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range trace.Spans {
			names = append(names, s.OperationName)
		}
		t.Fatalf("%d matching spans in %v, want 1", len(found), names)
	}
	return found[0]
}

func wantTags(t *testing.T, s jaegertest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := s.Tag(k)
		if !ok {
			t.Errorf("span %s: no tag %s (want %v)", s.OperationName, k, v)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("span %s: %s = %v, want %v", s.OperationName, k, got, v)
		}
	}
}

// TestTracing_Embeddings: an embeddings call's span is "embeddings
// {model}", of operation embeddings, with its usage and cost and no
// inputs, content capture on or not, and no finish reason.
func TestTracing_Embeddings(t *testing.T) {
	j := jaegertest.Start(t)
	gw, _, _ := tracedGateway(t, j, true, io.Discard)
	for i, c := range []struct{ path, body string }{
		{"/svc/v1/embeddings", `{"model":"caller-embed","dimensions":16,"input":["` + promptMarker + `","b"]}`},
		{"/svc/v1beta/models/caller-embed:batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"` + promptMarker + `"}]},"outputDimensionality":16}]}`},
	} {
		traceID := fmt.Sprintf("%032x", 0xe3bed0+i)
		resp, body := gw.do(t, http.MethodPost, c.path, c.body, "Traceparent", "00-"+traceID+"-00000000000000ab-01")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.path, resp.StatusCode, body)
		}
		callerSaw(t, resp, body)
		trace := j.WaitTrace(t, traceID, 4, 20*time.Second) // the call, admission, ledger, the attempt(s)
		call := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == "embeddings caller-embed" })
		// The attempt that answered is an embeddings client span too
		// (the flaky candidate, when it embeds, is tried before it).
		attempt := only(t, trace, func(s jaegertest.Span) bool { return s.OperationName == "embeddings fixture-model" })
		wantTags(t, attempt, map[string]any{"gen_ai.operation.name": "embeddings", "span.kind": "client", "svcgw.outcome": "ok"})
		for _, s := range trace.Spans {
			if strings.HasPrefix(s.OperationName, "chat ") {
				t.Errorf("an embeddings call's trace has the span %q", s.OperationName)
			}
		}
		wantTags(t, call, map[string]any{
			"gen_ai.operation.name":             "embeddings",
			"gen_ai.request.model":              "caller-embed",
			"gen_ai.embeddings.dimension.count": float64(16),
			"svcgw.request_type":                "embedding",
			"svcgw.streamed":                    false,
			"gen_ai.usage.output_tokens":        float64(0),
			"http.response.status_code":         float64(200),
		})
		for _, k := range []string{"gen_ai.usage.input_tokens", "svcgw.cost_usd", "svcgw.embeddings.inputs"} {
			if _, ok := call.Tag(k); !ok {
				t.Errorf("call span has no %s", k)
			}
		}
		if _, ok := call.Tag("gen_ai.response.finish_reasons"); ok {
			t.Errorf("an embedding's span has finish reasons")
		}
		noContent(t, trace)
	}
}
