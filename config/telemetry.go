package config

import (
	"net/url"
	"strconv"
)

// Telemetry is the telemetry section: where svcgw sends its traces over
// OTLP. Every field may be left out, to be taken from the standard
// OpenTelemetry environment variable named beside it; a field set here
// wins over its variable. Tracing is on when an endpoint is named, here or
// there.
type Telemetry struct {
	Endpoint       string            // OTEL_EXPORTER_OTLP_ENDPOINT
	TracesEndpoint string            // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	Protocol       string            // OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http/protobuf
	Headers        map[string]string // OTEL_EXPORTER_OTLP_HEADERS
	ServiceName    string            // OTEL_SERVICE_NAME
	Sampler        string            // OTEL_TRACES_SAMPLER
	SamplerArg     string            // OTEL_TRACES_SAMPLER_ARG
	// ResourceAttributes: OTEL_RESOURCE_ATTRIBUTES.
	ResourceAttributes map[string]string
	// CaptureMessageContent records prompts and completions on the spans
	// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT), each cut to
	// ContentMaxBytes (0: the default, 4096).
	CaptureMessageContent bool
	ContentMaxBytes       int
}

// fileTelemetry is the telemetry section as written.
type fileTelemetry struct {
	Endpoint              string            `yaml:"endpoint"`
	TracesEndpoint        string            `yaml:"traces_endpoint"`
	Protocol              string            `yaml:"protocol"`
	Headers               map[string]string `yaml:"headers"`
	ServiceName           string            `yaml:"service_name"`
	Sampler               string            `yaml:"sampler"`
	SamplerArg            string            `yaml:"sampler_arg"`
	ResourceAttributes    map[string]string `yaml:"resource_attributes"`
	CaptureMessageContent bool              `yaml:"capture_message_content"`
	ContentMaxBytes       int               `yaml:"content_max_bytes"`
}

// samplers are the OTEL_TRACES_SAMPLER values svcgw knows.
var samplers = map[string]bool{
	"always_on": true, "always_off": true, "traceidratio": true,
	"parentbased_always_on": true, "parentbased_always_off": true, "parentbased_traceidratio": true,
}

// loadTelemetry validates the telemetry section: ft as decoded, sec for
// the lines its errors point at.
func loadTelemetry(ft fileTelemetry, sec entry) (Telemetry, Errors) {
	var errs Errors
	t := Telemetry(ft)
	for key, v := range map[string]string{"endpoint": ft.Endpoint, "traces_endpoint": ft.TracesEndpoint} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.addf(sec.get(key).line(), "telemetry.%s: %q is not an http:// or https:// URL (such as http://localhost:4317)", key, v)
		}
	}
	switch ft.Protocol {
	case "", "grpc", "http/protobuf":
	default:
		errs.addf(sec.get("protocol").line(), "telemetry.protocol: %q: want grpc or http/protobuf", ft.Protocol)
	}
	if ft.Sampler != "" && !samplers[ft.Sampler] {
		errs.addf(sec.get("sampler").line(), "telemetry.sampler: %q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", ft.Sampler)
	}
	if ft.SamplerArg != "" {
		if r, err := strconv.ParseFloat(ft.SamplerArg, 64); err != nil || r < 0 || r > 1 {
			errs.addf(sec.get("sampler_arg").line(), "telemetry.sampler_arg: %q: want a ratio from 0 to 1", ft.SamplerArg)
		}
	}
	if ft.ContentMaxBytes < 0 {
		errs.addf(sec.get("content_max_bytes").line(), "telemetry.content_max_bytes must not be negative (0 keeps the default, 4096)")
	}
	return t, errs
}
