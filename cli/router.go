package cli

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/anthropic"
	"github.com/svcgw/svcgw/upstream/fixture"
	"github.com/svcgw/svcgw/upstream/gemini"
	"github.com/svcgw/svcgw/upstream/openai"
)

// buildRouter turns a configuration into a router: one backend per
// upstream model, shared by every route that names it (so its circuit
// breaker and connection pool are shared too).
func buildRouter(cfg *config.Config, log *slog.Logger, fixtureOpts fixture.Options, tracer upstream.Tracer) (*upstream.Router, error) {
	backends := map[config.Candidate]upstream.Candidate{}
	backend := func(c config.Candidate) (upstream.Candidate, error) {
		key := config.Candidate{Upstream: c.Upstream, Model: c.Model}
		if b, ok := backends[key]; ok {
			b.Group = c.Group
			return b, nil
		}
		u := cfg.Upstreams[c.Upstream]
		if u == nil {
			return upstream.Candidate{}, fmt.Errorf("route names unknown upstream %q", c.Upstream)
		}
		m := u.Models[c.Model]
		lim := upstream.Limits{ContextLength: m.ContextLength, MaxCompletionTokens: m.MaxCompletionTokens}
		opts := upstream.HTTPOptions{
			BaseURL: u.BaseURL, APIKey: u.APIKey, Model: c.Model, Limits: lim, Headers: u.Headers,
			ConnectTimeout: u.Timeouts.Connect, FirstByteTimeout: u.Timeouts.FirstByte, IdleTimeout: u.Timeouts.Idle,
			LegacyMaxTokens: u.LegacyMaxTokens, PromptCacheKey: u.PromptCacheKey, H2C: u.H2C, EmbedBatch: u.EmbedBatch,
		}
		var b upstream.Backend
		switch u.Protocol {
		case config.ProtocolOpenAI:
			b = openai.New(opts)
		case config.ProtocolAnthropic:
			b = anthropic.New(opts)
		case config.ProtocolGemini:
			b = gemini.New(opts)
		case config.ProtocolFixture:
			fo := fixtureOpts
			if u.FixtureTTFT > 0 {
				fo.TimeToFirstToken = u.FixtureTTFT
			}
			if u.FixtureTPS > 0 {
				fo.TokensPerSecond = u.FixtureTPS
			}
			if lim != (upstream.Limits{}) {
				fo.Limits = lim
			}
			b = fixture.New(fo)
		default:
			return upstream.Candidate{}, fmt.Errorf("upstream %q: unknown protocol %q", u.Name, u.Protocol)
		}
		cand := upstream.Candidate{Name: c.String(), Backend: b, Limits: lim,
			Upstream: c.Upstream, Protocol: u.Protocol, Model: c.Model, TraceContext: u.TraceContext}
		backends[key] = cand
		cand.Group = c.Group
		return cand, nil
	}
	router := upstream.NewRouterWithOptions(upstream.RouterOptions{Logger: log, Tracer: tracer}, nil)
	for t, tiers := range cfg.Routes {
		for tier, cs := range tiers {
			var cands []upstream.Candidate
			for _, c := range cs {
				b, err := backend(c)
				if err != nil {
					return nil, err
				}
				if _, ok := b.Backend.(upstream.Embedder); t == llm.TypeEmbedding && !ok {
					// config refuses a protocol without embeddings on
					// these routes; a backend that still cannot embed is
					// left out, and the operator told.
					log.Warn("upstream cannot serve embeddings; left out of the embedding route", "candidate", c.String(), "tier", tier)
					continue
				}
				cands = append(cands, b)
			}
			router.Set(t, tier, cands)
		}
	}
	return router, nil
}

// buildPrices overlays the configured prices on the default table.
func buildPrices(cfg *config.Config) *billing.Prices {
	prices := billing.DefaultPrices()
	for t, tiers := range cfg.Prices {
		for tier, p := range tiers {
			bp := billing.NewPrice(p.Input, p.Output)
			set := func(dst *apd.Decimal, src *apd.Decimal) {
				if src != nil {
					dst.Set(src)
				}
			}
			set(&bp.CachedInput, p.CachedInput)
			set(&bp.CacheWrite, p.CacheWrite)
			set(&bp.CacheWrite1h, p.CacheWrite1h)
			prices.Set(t, tier, bp)
		}
	}
	return prices
}
