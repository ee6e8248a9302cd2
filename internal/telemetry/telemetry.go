// Package telemetry sends svcgw's traces to the operator's tracing backend
// over OTLP: one server span per inference call, named and described by
// the OpenTelemetry GenAI semantic conventions, with a client span for
// each upstream attempt and child spans for admission and the ledger.
//
// Tracing is off unless the configuration's telemetry block or the
// standard OpenTelemetry environment names an endpoint (Resolve). When it
// is off there is no *Tracer, and the server's hooks are a nil check.
// When it is on, a call records its spans in place (span.go: the
// OpenTelemetry API's trace.Span, without the SDK's span machinery), and
// as it ends encodes them as OTLP (otlp.go) onto a bounded batch that
// one exporting goroutine sends over OTLP/gRPC or OTLP/HTTP (queue.go,
// export.go): a call never waits for the collector, and a collector that
// is slow or gone costs dropped spans, counted, not time. The SDK's
// samplers decide which calls are traced.
//
// Nothing here writes to a caller: the spans name backends, and are the
// operator's only.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// DefaultContentLimit bounds each captured prompt or completion, in bytes.
const DefaultContentLimit = 4096

// Options configure tracing. The configuration file's telemetry block
// sets them; Resolve fills what it leaves empty from the environment.
type Options struct {
	// Endpoint is the OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT): the
	// exporter adds /v1/traces to it over http/protobuf.
	Endpoint string
	// TracesEndpoint is the full URL of the traces endpoint
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); it wins over Endpoint.
	TracesEndpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTPProtobuf
	// (OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL);
	// grpc when empty.
	Protocol string
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS,
	// OTEL_EXPORTER_OTLP_TRACES_HEADERS): an API key, a dataset.
	Headers map[string]string
	// Compression is gzip or none (OTEL_EXPORTER_OTLP_COMPRESSION,
	// OTEL_EXPORTER_OTLP_TRACES_COMPRESSION); none when empty.
	Compression string
	// Certificate is a PEM file of the CAs that sign the collector's
	// certificate (OTEL_EXPORTER_OTLP_CERTIFICATE, _TRACES_CERTIFICATE);
	// ClientCertificate and ClientKey are svcgw's own, for mutual TLS
	// (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, _CLIENT_KEY, and their
	// _TRACES_ forms). The system's roots and no client certificate
	// when empty.
	Certificate, ClientCertificate, ClientKey string
	// ServiceName is service.name (OTEL_SERVICE_NAME); svcgw when empty.
	ServiceName string
	// Sampler and SamplerArg are OTEL_TRACES_SAMPLER and its argument:
	// always_on, always_off, traceidratio, parentbased_always_on,
	// parentbased_always_off, parentbased_traceidratio (the default, at
	// 1.0: every call, unless the caller's traceparent says not sampled).
	Sampler    string
	SamplerArg string
	// ResourceAttributes are added to the resource
	// (OTEL_RESOURCE_ATTRIBUTES: key=value,key=value).
	ResourceAttributes map[string]string
	// CaptureContent records prompts and completions on the call's span
	// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true), each cut
	// to ContentLimit bytes (DefaultContentLimit when zero).
	CaptureContent bool
	ContentLimit   int
	// Version is service.version.
	Version string

	// The queue: at most QueueSize spans wait (2048), exported in
	// requests of at most BatchSize spans (512) at least every
	// BatchDelay (1s), each request given ExportTimeout (10s).
	// OTEL_BSP_MAX_QUEUE_SIZE,
	// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_SCHEDULE_DELAY and
	// OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT or
	// OTEL_BSP_EXPORT_TIMEOUT (milliseconds, the first set wins) set
	// them when zero.
	QueueSize     int
	BatchSize     int
	BatchDelay    time.Duration
	ExportTimeout time.Duration
}

// Resolve fills in from getenv what o leaves empty and reports whether
// tracing is on: when an endpoint is named, by either, and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says otherwise.
// The file's values win over the environment's.
func Resolve(o Options, getenv func(string) string) (Options, bool, error) {
	or := func(v *string, keys ...string) {
		for _, k := range keys {
			if *v == "" {
				*v = strings.TrimSpace(getenv(k))
			}
		}
	}
	or(&o.Endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT")
	or(&o.TracesEndpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	or(&o.Protocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	or(&o.ServiceName, "OTEL_SERVICE_NAME")
	or(&o.Sampler, "OTEL_TRACES_SAMPLER")
	or(&o.SamplerArg, "OTEL_TRACES_SAMPLER_ARG")
	or(&o.Compression, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION")
	or(&o.Certificate, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE")
	or(&o.ClientCertificate, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
	or(&o.ClientKey, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY")
	if o.ServiceName == "" {
		o.ServiceName = "svcgw"
	}
	if o.Protocol == "" {
		o.Protocol = ProtocolGRPC
	}
	var errs []error
	if env := getenv("OTEL_RESOURCE_ATTRIBUTES"); env != "" {
		attrs, err := ParseKeyValues(env)
		if err != nil {
			errs = append(errs, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err))
		}
		for k, v := range o.ResourceAttributes {
			attrs[k] = v
		}
		o.ResourceAttributes = attrs
	}
	// Headers: the file's, then the traces' own variable, then the
	// general one.
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"} {
		env := getenv(key)
		if env == "" {
			continue
		}
		hs, err := ParseKeyValues(env)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		if o.Headers == nil {
			o.Headers = map[string]string{}
		}
		for k, v := range hs {
			if _, ok := o.Headers[k]; !ok {
				o.Headers[k] = v
			}
		}
	}
	switch strings.ToLower(o.Compression) {
	case "", "none", "gzip":
	default:
		errs = append(errs, fmt.Errorf("OTLP compression %q: want gzip or none", o.Compression))
	}
	if !o.CaptureContent {
		o.CaptureContent = strings.EqualFold(strings.TrimSpace(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")), "true")
	}
	if o.ContentLimit <= 0 {
		o.ContentLimit = DefaultContentLimit
	}
	ms := func(v *time.Duration, key string, def time.Duration) {
		if *v > 0 {
			return
		}
		*v = def
		if s := getenv(key); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive number of milliseconds", key, s))
				return
			}
			*v = time.Duration(n) * time.Millisecond
		}
	}
	count := func(v *int, key string, def int) {
		if *v > 0 {
			return
		}
		*v = def
		if s := getenv(key); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive number", key, s))
				return
			}
			*v = n
		}
	}
	count(&o.QueueSize, "OTEL_BSP_MAX_QUEUE_SIZE", 2048)
	count(&o.BatchSize, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
	ms(&o.BatchDelay, "OTEL_BSP_SCHEDULE_DELAY", time.Second)
	// Each request's timeout: the OTLP exporter's own variables (the
	// traces' first), then the batch processor's.
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
		if getenv(key) != "" { // ms leaves a value already set
			ms(&o.ExportTimeout, key, 10*time.Second)
		}
	}
	ms(&o.ExportTimeout, "OTEL_BSP_EXPORT_TIMEOUT", 10*time.Second)
	o.BatchSize = min(o.BatchSize, o.QueueSize)
	if err := CheckProtocol(o.Protocol); err != nil {
		errs = append(errs, err)
	}
	if _, err := NewSampler(o.Sampler, o.SamplerArg); err != nil {
		errs = append(errs, err)
	}
	for _, u := range []string{o.Endpoint, o.TracesEndpoint} {
		if u != "" {
			if err := CheckEndpoint(u); err != nil {
				errs = append(errs, err)
			}
		}
	}
	on := o.Endpoint != "" || o.TracesEndpoint != ""
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		on = false
	}
	if !on {
		return o, false, nil // an unused setting's mistake stops nothing
	}
	return o, true, errors.Join(errs...)
}

// CheckProtocol accepts the OTLP protocols svcgw exports with.
func CheckProtocol(p string) error {
	switch p {
	case ProtocolGRPC, ProtocolHTTPProtobuf:
		return nil
	}
	return fmt.Errorf("OTLP protocol %q: svcgw exports traces over %s or %s", p, ProtocolGRPC, ProtocolHTTPProtobuf)
}

// CheckEndpoint accepts an http:// or https:// URL with a host.
func CheckEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL such as http://localhost:4317", raw)
	}
	return nil
}

// NewSampler is the sampler OTEL_TRACES_SAMPLER names, with its argument
// (a ratio from 0 to 1 for the ratio samplers; 1 when empty).
func NewSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("sampler argument %q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch strings.TrimSpace(name) {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "", "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("sampler %q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// ParseKeyValues parses the environment's key=value,key=value lists
// (OTEL_RESOURCE_ATTRIBUTES), whose values are percent-encoded.
func ParseKeyValues(s string) (map[string]string, error) {
	m := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return m, fmt.Errorf("%q is not key=value", kv)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return m, fmt.Errorf("%q: %w", kv, err)
		}
		m[k] = dv
	}
	return m, nil
}

// Tracer makes svcgw's spans. A nil *Tracer is tracing off.
type Tracer struct {
	sampler sdktrace.Sampler
	queue   *queue
	prop    propagation.TraceContext
	capture bool
	limit   int
}

// New starts tracing with o (as Resolve returned it): the sender and the
// queue. It does not wait for the collector: the sender connects when it
// first exports.
func New(ctx context.Context, o Options) (*Tracer, error) {
	sampler, err := NewSampler(o.Sampler, o.SamplerArg)
	if err != nil {
		return nil, err
	}
	s, err := newSender(o)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", o.ServiceName)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	keys := slices.Sorted(maps.Keys(o.ResourceAttributes))
	for _, k := range keys {
		if k != "service.name" {
			attrs = append(attrs, attribute.String(k, o.ResourceAttributes[k]))
		}
	}
	p := newPreamble(attrs, scopeName, o.Version)
	return &Tracer{
		sampler: sampler,
		queue:   newQueue(s, p, o.QueueSize, o.BatchSize, o.BatchDelay, o.ExportTimeout),
		capture: o.CaptureContent,
		limit:   o.ContentLimit,
	}, nil
}

// scopeName is the instrumentation scope of svcgw's spans.
const scopeName = "github.com/svcgw/svcgw"

// Shutdown exports the spans still queued and stops the exporter, waiting
// at most until ctx ends.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.queue.Shutdown(ctx)
}

// ForceFlush exports the spans queued now, waiting at most until ctx ends.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.queue.ForceFlush(ctx)
}

// Spans counts the ended spans: exported, dropped because the queue was
// full, and dropped because their export failed.
type Spans struct {
	Exported, QueueFull, ExportFailed uint64
}

// Spans returns the counts so far (zero when tracing is off).
func (t *Tracer) Spans() Spans {
	if t == nil {
		return Spans{}
	}
	return Spans{
		Exported:     t.queue.exported.Load(),
		QueueFull:    t.queue.queueFull.Load(),
		ExportFailed: t.queue.exportFailed.Load(),
	}
}
