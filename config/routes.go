package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/svcgw/svcgw/llm"
)

// Candidate is one upstream model a route may use.
type Candidate struct {
	Upstream string
	Model    string
	// Group is non-empty for candidates written together as a nested list:
	// equals, among which calls are spread by cache affinity.
	Group string
}

func (c Candidate) String() string { return c.Upstream + "/" + c.Model }

// loadRoutes reads the routes section: routes.default, and per request
// type one list of candidates or a map of tiers to lists. Every candidate
// names an upstream of ups and a model it declares. The result routes
// every type × tier: the default fills what the file does not route.
func loadRoutes(sec entry, ups map[string]*Upstream) (map[llm.RequestType]map[llm.Tier][]Candidate, Errors) {
	var errs Errors
	routes, def, hasDefault := map[llm.RequestType]map[llm.Tier][]Candidate{}, []Candidate(nil), false
	keys := entries(sec.value)
	for _, e := range keys {
		key, node := e.key.Value, deref(e.value)
		path := "routes." + key
		if key == "default" {
			// A default whose candidates are all wrong is reported as
			// such, not as missing.
			def, hasDefault = candidates(ups, path, e.line(), node, &errs), true
			continue
		}
		t := llm.RequestType(key)
		if !t.Valid() {
			errs.addf(e.line(), "unknown request type %q in routes (want default or one of %s)", key, typeList())
			continue
		}
		routes[t] = map[llm.Tier][]Candidate{}
		switch node.Kind {
		case yaml.SequenceNode, yaml.ScalarNode:
			cs := candidates(ups, path, e.line(), node, &errs)
			for _, tier := range llm.Tiers {
				routes[t][tier] = cs
			}
		case yaml.MappingNode:
			for _, te := range entries(node) {
				tier := llm.Tier(te.key.Value)
				if !validTier(tier) {
					errs.addf(te.line(), "unknown tier %q (want low, medium or high)", tier)
					continue
				}
				routes[t][tier] = candidates(ups, path+"."+te.key.Value, te.line(), deref(te.value), &errs)
			}
		default:
			errs.addf(e.line(), "route %q must be a list of upstream/model candidates or a map of tiers", key)
		}
	}
	if !hasDefault {
		// Without a default, every pair must be routed explicitly, but
		// embeddings: left out, they are not offered.
		var missing []string
		for _, t := range llm.RequestTypes {
			if t == llm.TypeEmbedding {
				continue
			}
			for _, tier := range llm.Tiers {
				if len(routes[t][tier]) == 0 {
					missing = append(missing, string(t)+"/"+string(tier))
				}
			}
		}
		switch {
		case len(keys) == 0:
			errs.addf(sec.line(), "no routes: write routes.default: [upstream/model, …], then routes per request type as needed")
		case len(missing) > 0:
			errs.addf(sec.line(), "no routes.default, and no route for %s", strings.Join(missing, ", "))
		}
	}
	// An embedding route the file does not write takes the default's
	// fixture candidates only: a vendor's default model is a generation
	// model, which has no embeddings (the fixture embeds under any model
	// name). Without one, embeddings are not offered, while generation is.
	var embedDef []Candidate
	for _, c := range def {
		if u := ups[c.Upstream]; u != nil && u.Protocol == ProtocolFixture {
			embedDef = append(embedDef, c)
		}
	}
	return fill(routes, def, embedDef), errs
}

// candidates reads a list of "upstream/model" strings (or one string), the
// route at path whose key is on line. Errors about one candidate point at
// its own line. within are the lists being read around n, when n is a
// nested one.
func candidates(ups map[string]*Upstream, path string, line int, n *yaml.Node, errs *Errors, within ...*yaml.Node) []Candidate {
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	case yaml.SequenceNode:
		items = n.Content
	default:
		errs.addf(line, "expected a list of upstream/model candidates")
		return nil
	}
	var out []Candidate
	for i, it := range items {
		if alias := it; alias.Kind == yaml.AliasNode {
			// YAML lets a list hold an alias of itself (&a [x, *a]):
			// read, it would nest forever.
			if it = deref(alias); it == n || slices.Contains(within, it) {
				errs.addf(alias.Line, "candidate *%s: a list of candidates cannot hold itself", alias.Value)
				continue
			}
		}
		if it.Kind == yaml.SequenceNode {
			// A nested list is a group of equals.
			group := fmt.Sprintf("%s[%d]", path, i)
			for _, c := range candidates(ups, path, line, it, errs, append(within, n)...) {
				c.Group = group
				out = append(out, c)
			}
			continue
		}
		up, model, ok := strings.Cut(it.Value, "/")
		if it.Kind != yaml.ScalarNode || !ok || up == "" || model == "" {
			errs.addf(it.Line, "candidate %q must be written upstream/model", it.Value)
			continue
		}
		u := ups[up]
		switch {
		case u == nil:
			errs.addf(it.Line, "candidate %q: no upstream named %q", it.Value, up)
			continue
		case embeddingRoute(path) && !Embeds(u.Protocol):
			errs.addf(it.Line, "candidate %q in %s: upstream %q speaks the %s protocol, which has no embeddings endpoint (route embeddings to an openai, gemini or fixture upstream)", it.Value, path, up, u.Protocol)
			continue
		case len(u.Models) > 0:
			if _, ok := u.Models[model]; !ok {
				errs.addf(it.Line, "candidate %q: upstream %q declares no model %q", it.Value, up, model)
				continue
			}
		}
		out = append(out, Candidate{Upstream: up, Model: model})
	}
	if len(out) == 0 && len(items) == 0 {
		errs.addf(line, "empty candidate list")
	}
	return out
}

// embeddingRoute reports whether path (routes.<type>[.<tier>], or
// prices.…) is the embedding type's.
func embeddingRoute(path string) bool {
	_, key, _ := strings.Cut(path, ".")
	rest, ok := strings.CutPrefix(key, string(llm.TypeEmbedding))
	return ok && (rest == "" || rest[0] == '.')
}

// fill gives every type × tier not in routes the candidates def, and an
// embedding route embedDef (def's fixture candidates), which may be none.
func fill(routes map[llm.RequestType]map[llm.Tier][]Candidate, def, embedDef []Candidate) map[llm.RequestType]map[llm.Tier][]Candidate {
	if routes == nil {
		routes = map[llm.RequestType]map[llm.Tier][]Candidate{}
	}
	for _, t := range llm.RequestTypes {
		if routes[t] == nil {
			routes[t] = map[llm.Tier][]Candidate{}
		}
		for _, tier := range llm.Tiers {
			switch {
			case len(routes[t][tier]) > 0:
			case t == llm.TypeEmbedding:
				routes[t][tier] = embedDef
			default:
				routes[t][tier] = def
			}
		}
	}
	return routes
}

func validTier(t llm.Tier) bool {
	for _, v := range llm.Tiers {
		if v == t {
			return true
		}
	}
	return false
}

func typeList() string {
	s := make([]string, len(llm.RequestTypes))
	for i, t := range llm.RequestTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
