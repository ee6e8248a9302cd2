package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/internal/telemetry"
	"github.com/svcgw/svcgw/upstream"
)

// tracingFlushTimeout bounds how long shutdown waits for the last spans
// to reach the collector.
const tracingFlushTimeout = 5 * time.Second

// startTracing starts the exporter of the operator's traces when the
// configuration's telemetry section or the OpenTelemetry environment
// names an endpoint; nil (tracing off) otherwise.
func startTracing(ctx context.Context, t config.Telemetry, version string, log *slog.Logger) (*telemetry.Tracer, error) {
	o, on, err := telemetry.Resolve(telemetry.Options{
		Endpoint: t.Endpoint, TracesEndpoint: t.TracesEndpoint, Protocol: t.Protocol, Headers: t.Headers,
		ServiceName: t.ServiceName, Sampler: t.Sampler, SamplerArg: t.SamplerArg,
		ResourceAttributes: t.ResourceAttributes,
		CaptureContent:     t.CaptureMessageContent, ContentLimit: t.ContentMaxBytes,
		Version: version,
	}, os.Getenv)
	if !on {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	tr, err := telemetry.New(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	endpoint := o.TracesEndpoint
	if endpoint == "" {
		endpoint = o.Endpoint
	}
	log.Info("tracing on", "endpoint", endpoint, "protocol", o.Protocol, "service", o.ServiceName,
		"sampler", o.Sampler, "sampler_arg", o.SamplerArg, "capture_message_content", o.CaptureContent)
	return tr, nil
}

// stopTracing sends the spans still queued and stops the exporter.
func stopTracing(tr *telemetry.Tracer, log *slog.Logger) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	err := tr.Shutdown(ctx)
	n := tr.Spans()
	attrs := []any{"exported", n.Exported, "dropped_queue_full", n.QueueFull, "dropped_export_failed", n.ExportFailed}
	if err != nil {
		log.Warn("shutdown: the last spans did not all reach the collector", append(attrs, "err", err)...)
		return
	}
	log.Info("shutdown: spans flushed", attrs...)
}

// routerTracer is tr as the router's attempt tracer: nil when tracing is
// off (a nil *Tracer in the interface would not be).
func routerTracer(tr *telemetry.Tracer) upstream.Tracer {
	if tr == nil {
		return nil
	}
	return tr
}
