package config

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Protocols an upstream can speak.
const (
	ProtocolOpenAI    = "openai"    // any chat-completions-compatible server
	ProtocolAnthropic = "anthropic" // Anthropic messages
	ProtocolGemini    = "gemini"    // Gemini generate-content
	ProtocolFixture   = "fixture"   // the built-in deterministic backend
)

// Embeds reports whether an upstream of protocol has an embeddings
// endpoint svcgw calls: OpenAI's /embeddings (and every compatible
// server's), Gemini's embedContent and batchEmbedContents, the fixture.
// Anthropic has none.
func Embeds(protocol string) bool {
	return protocol == ProtocolOpenAI || protocol == ProtocolGemini || protocol == ProtocolFixture
}

// Upstream is one server svcgw calls.
type Upstream struct {
	Name     string
	Protocol string
	BaseURL  string
	APIKey   string
	Headers  map[string]string
	Timeouts Timeouts
	// Models are the backend models this upstream serves, by name.
	Models map[string]Model
	// LegacyMaxTokens (openai protocol) sends the output cap as max_tokens
	// for older OpenAI-compatible servers (Ollama) that ignore
	// max_completion_tokens.
	LegacyMaxTokens bool
	// PromptCacheKey (openai protocol) sends a per-account
	// prompt_cache_key. It defaults to on for OpenAI's own API
	// (api.openai.com) and off elsewhere: compatible servers that refuse
	// unknown fields would fail every call.
	PromptCacheKey bool
	// H2C speaks unencrypted HTTP/2 to the upstream with prior knowledge
	// (no upgrade), for a local server on an http:// base_url that
	// serves it: one connection carries every stream, which costs svcgw
	// less memory per open stream than HTTP/1.1's connection each.
	// https:// upstreams negotiate HTTP/2 on their own (ALPN).
	H2C bool
	// TraceContext sends each request to the upstream a W3C traceparent
	// naming the attempt's span, when tracing is on. Off by default: the
	// header reaches a third party.
	TraceContext bool
	// EmbedBatch (openai and gemini protocols) is the most inputs one
	// embeddings request to this upstream carries; a call of more is sent
	// as several. Zero takes the protocol's own limit (openai 512, gemini
	// 100). Hugging Face TEI refuses more than its max_client_batch_size,
	// 32 by default, with a 422.
	EmbedBatch int
	// Fixture options (protocol fixture only).
	FixtureTTFT time.Duration
	FixtureTPS  float64
}

// Timeouts bound an upstream call. Zero means the default.
type Timeouts struct {
	Connect   time.Duration // dial + TLS
	FirstByte time.Duration // until response headers / the first event
	Idle      time.Duration // the longest gap between stream events
}

// Model is a backend model's limits.
type Model struct {
	ContextLength       int
	MaxCompletionTokens int
}

// fileUpstream is one entry of the upstreams section as written.
type fileUpstream struct {
	Protocol string            `yaml:"protocol"`
	BaseURL  string            `yaml:"base_url"`
	APIKey   string            `yaml:"api_key"`
	Headers  map[string]string `yaml:"headers"`
	// LegacyMaxTokens: see Upstream.LegacyMaxTokens.
	LegacyMaxTokens bool `yaml:"legacy_max_tokens"`
	// PromptCacheKey: see Upstream.PromptCacheKey; nil takes the default.
	PromptCacheKey *bool `yaml:"prompt_cache_key"`
	// H2C: see Upstream.H2C.
	H2C bool `yaml:"h2c"`
	// TraceContext: see Upstream.TraceContext.
	TraceContext bool `yaml:"trace_context"`
	// EmbedBatch: see Upstream.EmbedBatch.
	EmbedBatch int `yaml:"embed_batch"`
	Timeouts   struct {
		Connect   string `yaml:"connect"`
		FirstByte string `yaml:"first_byte"`
		Idle      string `yaml:"idle"`
	} `yaml:"timeouts"`
	Models map[string]struct {
		ContextLength       int `yaml:"context_length"`
		MaxCompletionTokens int `yaml:"max_completion_tokens"`
	} `yaml:"models"`
	Fixture struct {
		TTFT string  `yaml:"ttft"`
		TPS  float64 `yaml:"tps"`
	} `yaml:"fixture"`
}

var defaultBaseURL = map[string]string{
	ProtocolAnthropic: "https://api.anthropic.com",
	ProtocolGemini:    "https://generativelanguage.googleapis.com",
}

// loadUpstreams validates the upstreams section: file as decoded, sec for
// the lines its errors point at.
func loadUpstreams(file map[string]fileUpstream, sec entry) (map[string]*Upstream, Errors) {
	var errs Errors
	if len(file) == 0 {
		errs.addf(sec.line(), "no upstreams: declare at least one (or run without --config to use the fixture backend)")
	}
	ups := make(map[string]*Upstream, len(file))
	for _, name := range slices.Sorted(maps.Keys(file)) {
		ups[name] = loadUpstream(name, file[name], sec.get(name), &errs)
	}
	return ups, errs
}

// loadUpstream validates one upstream, e being its entry in the file.
func loadUpstream(name string, fu fileUpstream, e entry, errs *Errors) *Upstream {
	u := &Upstream{Name: name, Protocol: fu.Protocol, BaseURL: strings.TrimRight(fu.BaseURL, "/"), APIKey: fu.APIKey,
		Headers: fu.Headers, LegacyMaxTokens: fu.LegacyMaxTokens, H2C: fu.H2C, TraceContext: fu.TraceContext, Models: map[string]Model{}}
	switch fu.Protocol {
	case ProtocolOpenAI, ProtocolAnthropic, ProtocolGemini:
		if u.BaseURL == "" {
			u.BaseURL = defaultBaseURL[fu.Protocol]
		}
		if fu.Protocol == ProtocolOpenAI {
			u.PromptCacheKey = strings.HasPrefix(u.BaseURL, "https://api.openai.com/")
			if fu.PromptCacheKey != nil {
				u.PromptCacheKey = *fu.PromptCacheKey
			}
		}
		if fu.EmbedBatch < 0 {
			errs.addf(e.get("embed_batch").line(), "upstream %q: embed_batch must be a positive number of inputs (0 or absent: the protocol's own limit)", name)
		} else if fu.Protocol == ProtocolAnthropic && fu.EmbedBatch > 0 {
			errs.addf(e.get("embed_batch").line(), "upstream %q: embed_batch is for openai and gemini upstreams (anthropic has no embeddings)", name)
		}
		u.EmbedBatch = fu.EmbedBatch
		if u.BaseURL == "" {
			errs.addf(e.line(), "upstream %q: base_url is required for protocol openai", name)
		} else if !strings.HasPrefix(u.BaseURL, "http://") && !strings.HasPrefix(u.BaseURL, "https://") {
			errs.addf(e.get("base_url").line(), "upstream %q: base_url must start with http:// or https://", name)
		} else if u.H2C && !strings.HasPrefix(u.BaseURL, "http://") {
			errs.addf(e.get("h2c").line(), "upstream %q: h2c is unencrypted HTTP/2 and needs an http:// base_url (https:// upstreams negotiate HTTP/2 themselves)", name)
		}
	case ProtocolFixture:
		if fu.EmbedBatch != 0 {
			errs.addf(e.get("embed_batch").line(), "upstream %q: embed_batch is for openai and gemini upstreams, not protocol fixture (which has no batch limit)", name)
		}
		if fu.H2C {
			errs.addf(e.get("h2c").line(), "upstream %q: h2c is for upstreams reached over the network, not protocol fixture", name)
		}
		if fu.Fixture.TTFT != "" {
			d, err := time.ParseDuration(fu.Fixture.TTFT)
			if err != nil || d < 0 {
				errs.addf(e.get("fixture", "ttft").line(), "upstream %q: fixture.ttft must be a duration such as 200ms", name)
			}
			u.FixtureTTFT = d
		}
		u.FixtureTPS = fu.Fixture.TPS
	case "":
		errs.addf(e.line(), "upstream %q: protocol is required (openai, anthropic, gemini or fixture)", name)
	default:
		errs.addf(e.get("protocol").line(), "upstream %q: unknown protocol %q (want openai, anthropic, gemini or fixture)", name, fu.Protocol)
	}
	for _, t := range []struct {
		key, v string
		dst    *time.Duration
	}{
		{"connect", fu.Timeouts.Connect, &u.Timeouts.Connect},
		{"first_byte", fu.Timeouts.FirstByte, &u.Timeouts.FirstByte},
		{"idle", fu.Timeouts.Idle, &u.Timeouts.Idle},
	} {
		if t.v == "" {
			continue
		}
		d, err := time.ParseDuration(t.v)
		if err != nil || d <= 0 {
			errs.addf(e.get("timeouts", t.key).line(), "upstream %q: timeouts.%s must be a positive duration such as 30s", name, t.key)
			continue
		}
		*t.dst = d
	}
	if len(fu.Models) == 0 {
		errs.addf(e.line(), "upstream %q: declare the backend models it serves under models:", name)
	}
	for _, mname := range slices.Sorted(maps.Keys(fu.Models)) {
		m := fu.Models[mname]
		line := e.get("models", mname).line()
		if m.ContextLength < 0 || m.MaxCompletionTokens < 0 {
			errs.addf(line, "model %q: limits must not be negative", mname)
		}
		if m.ContextLength > 0 && m.MaxCompletionTokens > m.ContextLength {
			errs.addf(line, "model %q: max_completion_tokens exceeds context_length", mname)
		}
		u.Models[mname] = Model{ContextLength: m.ContextLength, MaxCompletionTokens: m.MaxCompletionTokens}
	}
	return u
}
