//go:build unix

package telemetry

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
)

// discardSender counts the bytes it is sent.
type discardSender struct{ bytes int }

func (d *discardSender) send(_ context.Context, body []byte) error {
	d.bytes += len(body)
	return nil
}

func (d *discardSender) shutdown(context.Context) error { return nil }

// BenchmarkCallSpans is what tracing adds to one non-streaming call, in
// this package: the call's four spans as the server and the router make
// them (the call, admission, one attempt, the ledger, the call released
// as the server releases it), and their share
// of the export's encoding, flushed inside the measurement. It leaves
// out the server's own part (the request's copy with the span's context)
// and sending the export. cpu-µs/op is the process's CPU time per call
// (getrusage: the calls and the exporting goroutine together), which the
// machine's other load does not inflate as it does ns/op.
func BenchmarkCallSpans(b *testing.B) {
	d := &discardSender{}
	tr := testTracer(d, 1<<16, 512)
	tr.queue.send = d
	h := http.Header{}
	temp := 0.7
	req := &llm.Request{Model: "svc-fusion", MaxTokens: 256, Temperature: &temp}
	c := &upstream.Candidate{Name: "fixture", Upstream: "fixture", Protocol: "fixture", Model: "fixture"}
	b.ReportAllocs()
	before := processCPU(b)
	for b.Loop() {
		ctx, call := tr.StartCall(context.Background(), h, OperationChat, "chat", "POST /svc/v1/chat/completions", "01JABCDEFGHJKMNPQRSTVWXYZ0")
		tr.Request(call, Call{RequestType: "chat", Tier: "standard", AccountID: "1", KeyID: "key_01J", App: "", Request: req})
		_, adm := tr.StartChild(ctx, SpanAdmission)
		EndChild(adm, call, nil)
		actx := tr.StartAttempt(ctx, c, 0, false, upstream.OperationChat)
		tr.EndAttempt(actx, &upstream.Attempt{Outcome: upstream.OutcomeOK})
		tr.Metered(call, Result{ResponseID: "gen_01JABCDEFGHJKMNPQRSTVWXYZ", Usage: llm.Usage{InputTokens: 20, OutputTokens: 40},
			FinishReason: "stop", CostMicros: 120, FirstToken: 3 * time.Millisecond})
		_, led := tr.StartChild(ctx, SpanLedger)
		EndChild(led, call, nil)
		EndCall(call, 200)
		Release(call)
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-before).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(d.bytes)/float64(b.N), "otlp-B/op")
	// Spans the queue dropped, full: the exporting goroutine fell behind
	// (the figures above are then of fewer spans than four a call).
	b.ReportMetric(float64(tr.Spans().QueueFull)/float64(b.N), "dropped/op")
	_ = tr.Shutdown(context.Background())
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
