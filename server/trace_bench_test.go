package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/jaegertest"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// benchTracer is a tracer sampling every call into an OTLP/HTTP sink on
// loopback that reads and discards each export: what tracing costs the
// gateway's process (spans, their queue, the export's encoding and
// sending), without a collector's own work.
//
// With SVCGW_BENCH_JAEGER=1 the spans go to a real Jaeger over OTLP/gRPC
// instead (internal/jaegertest; Jaeger's own work is another process's).
func benchTracer(b *testing.B) *telemetry.Tracer {
	endpoint, protocol := "", telemetry.ProtocolHTTPProtobuf
	if os.Getenv("SVCGW_BENCH_JAEGER") == "1" {
		endpoint, protocol = jaegertest.Start(b).OTLPGRPC, telemetry.ProtocolGRPC
	} else {
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		}))
		b.Cleanup(sink.Close)
		endpoint = sink.URL
	}
	o, _, err := telemetry.Resolve(telemetry.Options{
		Endpoint: endpoint, Protocol: protocol, Sampler: "always_on",
		QueueSize: 1 << 16, // no span dropped: every call's spans are exported and counted
	}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	tr, err := telemetry.New(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		if n := tr.Spans(); n.QueueFull+n.ExportFailed > 0 {
			b.Errorf("spans dropped: %+v", n)
		}
	})
	return tr
}

func benchCallTraced(b *testing.B, path, body string) {
	tr := benchTracer(b)
	fx := fixture.New(fixture.Options{})
	router := upstream.NewRouterWithOptions(upstream.RouterOptions{Tracer: tr},
		[]upstream.Candidate{{Name: "fixture", Backend: fx, Upstream: "fixture", Protocol: "fixture", Model: "fixture"}})
	h, key, st := benchGatewayWith(b, nil, func(o *Options) { o.Tracer = tr }, router)
	benchServe(b, h, key, st, path, body)
}

// BenchmarkPipeline_ChatTraced and _ChatStreamTraced are
// BenchmarkPipeline_Chat and _ChatStream with every call traced: the
// difference is what tracing costs a call.
func BenchmarkPipeline_ChatTraced(b *testing.B) {
	benchCallTraced(b, "/svc/v1/chat/completions", benchChat)
}

func BenchmarkPipeline_ChatStreamTraced(b *testing.B) {
	benchCallTraced(b, "/svc/v1/chat/completions", benchChatStream)
}
