//go:build unix

package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// BenchmarkTracing_CPU runs the same non-streaming chat call with tracing
// off and on (every call sampled, exported to the loopback sink) and
// reports the process's CPU time per call (getrusage: the handlers, the
// ledger and the span exporter's goroutine together), which the machine's
// other load does not inflate as it does ns/op. The spans still queued
// are flushed inside the measurement.
func BenchmarkTracing_CPU(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "off"
		if traced {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var tr *telemetry.Tracer
			fx := fixture.New(fixture.Options{})
			ro := upstream.RouterOptions{}
			if traced {
				tr = benchTracer(b)
				ro.Tracer = tr
			}
			router := upstream.NewRouterWithOptions(ro,
				[]upstream.Candidate{{Name: "fixture", Backend: fx, Upstream: "fixture", Protocol: "fixture", Model: "fixture"}})
			h, key, st := benchGatewayWith(b, nil, func(o *Options) { o.Tracer = tr }, router)
			b.ReportAllocs()
			before := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/svc/v1/chat/completions", strings.NewReader(benchChat))
					req.Header.Set("Authorization", "Bearer "+key)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
			if err := st.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			if err := tr.ForceFlush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
