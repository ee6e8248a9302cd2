package config

import (
	"reflect"

	"github.com/cockroachdb/apd/v3"
	"go.yaml.in/yaml/v3"

	"github.com/svcgw/svcgw/llm"
)

// Price is the caller's charge in USD per million tokens. Nil cache prices
// derive from Input as billing.NewPrice does.
type Price struct {
	Input, Output                         apd.Decimal
	CachedInput, CacheWrite, CacheWrite1h *apd.Decimal
}

// filePrice is one price as written, for a type or for a tier of one.
type filePrice struct {
	Input        string `yaml:"input"`
	Output       string `yaml:"output"`
	CachedInput  string `yaml:"cached_input"`
	CacheWrite   string `yaml:"cache_write"`
	CacheWrite1h string `yaml:"cache_write_1h"`
}

// loadPrices reads the prices section: per request type (or default) one
// price or a map of tiers to prices. prices.default fills every tier a type
// does not price itself; what the file prices nowhere keeps billing's
// default, so the result may be empty.
func loadPrices(sec entry) (map[llm.RequestType]map[llm.Tier]Price, Errors) {
	var errs Errors
	prices := map[llm.RequestType]map[llm.Tier]Price{}
	var defPrices map[llm.Tier]Price
	for _, e := range entries(sec.value) {
		key, node := e.key.Value, deref(e.value)
		path := "prices." + key
		typ := llm.RequestType(key)
		if key != "default" && !typ.Valid() {
			errs.addf(e.line(), "unknown request type %q in prices (want default or one of %s)", key, typeList())
			continue
		}
		perTier := map[llm.Tier]Price{}
		switch {
		case node.Kind == yaml.MappingNode && !tierKeys(node):
			pr, ok := price(path, e, &errs)
			if !ok {
				continue
			}
			for _, tier := range llm.Tiers {
				perTier[tier] = pr
			}
		case node.Kind == yaml.MappingNode:
			for _, te := range entries(node) {
				tier := llm.Tier(te.key.Value)
				if !validTier(tier) {
					errs.addf(te.line(), "unknown tier %q (want low, medium or high)", tier)
					continue
				}
				if pr, ok := price(path+"."+te.key.Value, te, &errs); ok {
					perTier[tier] = pr
				}
			}
		default:
			errs.addf(e.line(), "prices.%s must be a price (input, output, …) or a map of tiers to prices", key)
			continue
		}
		if key == "default" {
			defPrices = perTier
			continue
		}
		prices[typ] = perTier
	}
	// The default price fills every tier a generation type does not price
	// itself. Embeddings cost a small fraction of a generation, so a
	// default written for generation does not price them: they keep
	// their built-in price unless prices.embedding sets one.
	for _, t := range llm.RequestTypes {
		if t == llm.TypeEmbedding {
			continue
		}
		for tier, pr := range defPrices {
			if prices[t] == nil {
				prices[t] = map[llm.Tier]Price{}
			}
			if _, ok := prices[t][tier]; !ok {
				prices[t][tier] = pr
			}
		}
	}
	return prices, errs
}

// tierKeys reports whether every key of mapping n is a tier: a price per
// tier rather than one price.
func tierKeys(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !validTier(llm.Tier(n.Content[i].Value)) {
			return false
		}
	}
	return len(n.Content) > 0
}

// price reads the price at path, e being its entry in the file (a free-form
// part that checkShape left alone, so its shape is checked here); it
// reports whether the price is valid.
func price(path string, e entry, errs *Errors) (Price, bool) {
	n := deref(e.value)
	shapeErrs := len(*errs)
	checkShape(n, reflect.TypeFor[filePrice](), path, errs.addf)
	if len(*errs) > shapeErrs {
		return Price{}, false
	}
	var fp filePrice
	if err := n.Decode(&fp); err != nil {
		errs.addf(e.line(), "%s: %v", path, err)
		return Price{}, false
	}
	var pr Price
	ok := true
	parse := func(field, v string, required bool) *apd.Decimal {
		if v == "" {
			if required {
				errs.addf(e.line(), "%s: %s is required", path, field)
				ok = false
			}
			return nil
		}
		d, _, err := apd.NewFromString(v)
		if err != nil || d.Form != apd.Finite || d.Negative {
			errs.addf(e.get(field).line(), "%s.%s: %q is not a non-negative decimal (USD per million tokens)", path, field, v)
			ok = false
			return nil
		}
		return d
	}
	if d := parse("input", fp.Input, true); d != nil {
		pr.Input = *d
	}
	// An embedding has no output: its price is per million input tokens,
	// and an output rate, if written, is never charged.
	if d := parse("output", fp.Output, !embeddingRoute(path)); d != nil {
		pr.Output = *d
	}
	pr.CachedInput = parse("cached_input", fp.CachedInput, false)
	pr.CacheWrite = parse("cache_write", fp.CacheWrite, false)
	pr.CacheWrite1h = parse("cache_write_1h", fp.CacheWrite1h, false)
	return pr, ok
}
