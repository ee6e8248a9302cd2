// Package config reads svcgw's YAML configuration file: the upstreams and
// the backend models each serves, the routes from request type × effort tier
// to ordered candidates, the caller's prices, and limit defaults.
//
// Secrets come from the environment through ${VAR} (or ${VAR:-default})
// expansion inside string values; a referenced variable that is unset and
// has no default is an error. Errors name the line they come from.
//
// config imports llm only (and apd for prices); it never builds backends or
// touches the network: cli turns a Config into an upstream.Router.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"go.yaml.in/yaml/v3"

	"github.com/svcgw/svcgw/llm"
)

// Protocols an upstream can speak.
const (
	ProtocolOpenAI    = "openai"    // any chat-completions-compatible server
	ProtocolAnthropic = "anthropic" // Anthropic messages
	ProtocolGemini    = "gemini"    // Gemini generate-content
	ProtocolFixture   = "fixture"   // the built-in deterministic backend
)

// Config is a validated configuration file.
type Config struct {
	// Upstreams by name.
	Upstreams map[string]*Upstream
	// Routes maps each request type and tier to its ordered candidates.
	// Every pair has at least one candidate after Load.
	Routes map[llm.RequestType]map[llm.Tier][]Candidate
	// Prices overrides the default price table per type and tier; a pair
	// missing here keeps billing's default.
	Prices map[llm.RequestType]map[llm.Tier]Price
	Limits Limits
	// Retention says how long detail is kept (see Retention).
	Retention Retention
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

// Candidate is one upstream model a route may use.
type Candidate struct {
	Upstream string
	Model    string
	// Group is non-empty for candidates written together as a nested list:
	// equals, among which calls are spread by cache affinity.
	Group string
}

func (c Candidate) String() string { return c.Upstream + "/" + c.Model }

// Price is the caller's charge in USD per million tokens. Nil cache prices
// derive from Input as billing.NewPrice does.
type Price struct {
	Input, Output                         apd.Decimal
	CachedInput, CacheWrite, CacheWrite1h *apd.Decimal
}

// Limits are request-limit defaults. Zero fields keep the server's
// defaults.
type Limits struct {
	MaxBodyBytes        int64 // request body bytes (413 above)
	RPM, TPM            int   // per key, unless the key sets its own; 0: unlimited
	MaxMessages         int   // turns per request
	MaxParts            int   // parts per message, system prompt or tool result
	MaxTools            int   // tool definitions per request
	MaxSchemaBytes      int   // bytes per JSON Schema
	ReserveOutputTokens int   // output tokens a call's reservation covers
	BudgetRefresh       time.Duration
	// Connections and slow callers (see server.Options and
	// server.ServeOptions): the longest pause in a request body and its
	// minimum average rate in bytes per second after that, the header and
	// keep-alive idle timeouts, and the cap on open connections.
	BodyTimeout    time.Duration
	BodyMinRate    int64
	HeaderTimeout  time.Duration
	IdleTimeout    time.Duration
	MaxConnections int
}

// fileConfig is the YAML document as written.
type fileConfig struct {
	Upstreams map[string]fileUpstream `yaml:"upstreams"`
	Routes    map[string]yaml.Node    `yaml:"routes"`
	Prices    map[string]yaml.Node    `yaml:"prices"`
	Limits    struct {
		MaxBodyBytes        int64  `yaml:"max_body_bytes"`
		RPM                 int    `yaml:"rpm"`
		TPM                 int    `yaml:"tpm"`
		MaxMessages         int    `yaml:"max_messages"`
		MaxParts            int    `yaml:"max_parts"`
		MaxTools            int    `yaml:"max_tools"`
		MaxSchemaBytes      int    `yaml:"max_schema_bytes"`
		ReserveOutputTokens int    `yaml:"reserve_output_tokens"`
		BudgetRefresh       string `yaml:"budget_refresh"`
		BodyTimeout         string `yaml:"body_timeout"`
		BodyMinRate         int64  `yaml:"body_min_rate"`
		HeaderTimeout       string `yaml:"header_timeout"`
		IdleTimeout         string `yaml:"idle_timeout"`
		MaxConnections      int    `yaml:"max_connections"`
	} `yaml:"limits"`
	Retention struct {
		Generations string `yaml:"generations"`
	} `yaml:"retention"`
}

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
	H2C      bool `yaml:"h2c"`
	Timeouts struct {
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

type filePrice struct {
	Input        string `yaml:"input"`
	Output       string `yaml:"output"`
	CachedInput  string `yaml:"cached_input"`
	CacheWrite   string `yaml:"cache_write"`
	CacheWrite1h string `yaml:"cache_write_1h"`
}

// Error is a configuration error at a line of the file.
type Error struct {
	File string // set by LoadFile
	Line int    // 0 when the error has no line
	Msg  string // in the file's own terms: keys, values, lines
}

// Error formats e as file:line: message, the form editors and compilers
// use.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		if e.File == "" {
			b.WriteString("line ")
		}
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors are all the errors found in one file, in line order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// LoadFile reads and validates the configuration file at path. Its errors
// are Errors naming path.
func LoadFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Load(b, os.LookupEnv)
	var errs Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			e.File = path
		}
	}
	return cfg, err
}

// Default is the configuration used without a file: the fixture backend
// serves every route.
func Default() *Config {
	c := &Config{
		Upstreams: map[string]*Upstream{"fixture": {
			Name: "fixture", Protocol: ProtocolFixture,
			Models: map[string]Model{"fixture": {ContextLength: 200000, MaxCompletionTokens: 32000}},
		}},
	}
	c.Routes = fill(nil, []Candidate{{Upstream: "fixture", Model: "fixture"}})
	return c
}

// fill gives every type × tier not in routes the candidates def.
func fill(routes map[llm.RequestType]map[llm.Tier][]Candidate, def []Candidate) map[llm.RequestType]map[llm.Tier][]Candidate {
	if routes == nil {
		routes = map[llm.RequestType]map[llm.Tier][]Candidate{}
	}
	for _, t := range llm.RequestTypes {
		if routes[t] == nil {
			routes[t] = map[llm.Tier][]Candidate{}
		}
		for _, tier := range llm.Tiers {
			if len(routes[t][tier]) == 0 {
				routes[t][tier] = def
			}
		}
	}
	return routes
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// Load parses and validates a configuration document; lookupEnv resolves
// ${VAR} references.
func Load(doc []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, yamlError(err)
	}
	var errs Errors
	// Unknown keys and wrong types, reported at their lines in the file as
	// written, all of them; validation goes on past them, so one pass
	// reports every error. (${VAR} references belong in string values.)
	checkShape(&root, reflect.TypeFor[fileConfig](), "", func(line int, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf(format, args...)})
	})
	// Expand ${VAR} in scalar values, where the node still knows its line.
	walk(&root, func(n *yaml.Node) {
		if n.Kind != yaml.ScalarNode || !strings.Contains(n.Value, "${") {
			return
		}
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if v, ok := lookupEnv(m[1]); ok && v != "" {
				return v
			}
			if m[2] != "" {
				return m[3]
			}
			errs = append(errs, &Error{Line: n.Line, Msg: fmt.Sprintf("environment variable %s is not set (write ${%s:-default} for a default)", m[1], m[1])})
			return ""
		})
	})
	var fc fileConfig
	if len(root.Content) > 0 && len(errs) == 0 {
		if err := root.Decode(&fc); err != nil {
			return nil, yamlError(err) // checkShape missed it
		}
	} else if len(root.Content) > 0 {
		// The decoder skips what checkShape reported (unknown keys, values
		// of the wrong kind) and decodes the rest, to be validated too.
		_ = root.Decode(&fc)
	}
	lines := lineIndex(&root)
	fl := fc.Limits
	cfg := &Config{Upstreams: map[string]*Upstream{}, Limits: Limits{
		MaxBodyBytes: fl.MaxBodyBytes, RPM: fl.RPM, TPM: fl.TPM,
		MaxMessages: fl.MaxMessages, MaxParts: fl.MaxParts, MaxTools: fl.MaxTools, MaxSchemaBytes: fl.MaxSchemaBytes,
		ReserveOutputTokens: fl.ReserveOutputTokens,
		BodyMinRate:         fl.BodyMinRate, MaxConnections: fl.MaxConnections,
	}}
	at := func(path string) int {
		if n, ok := strings.CutPrefix(path, "#line:"); ok {
			var line int
			fmt.Sscan(n, &line)
			return line
		}
		return lines[path]
	}
	add := func(path, format string, args ...any) {
		errs = append(errs, &Error{Line: at(path), Msg: fmt.Sprintf(format, args...)})
	}

	if len(fc.Upstreams) == 0 {
		add("upstreams", "no upstreams: declare at least one (or run without --config to use the fixture backend)")
	}
	for name, fu := range fc.Upstreams {
		p := "upstreams." + name
		u := &Upstream{Name: name, Protocol: fu.Protocol, BaseURL: strings.TrimRight(fu.BaseURL, "/"), APIKey: fu.APIKey,
			Headers: fu.Headers, LegacyMaxTokens: fu.LegacyMaxTokens, H2C: fu.H2C, Models: map[string]Model{}}
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
			if u.BaseURL == "" {
				add(p, "upstream %q: base_url is required for protocol openai", name)
			} else if !strings.HasPrefix(u.BaseURL, "http://") && !strings.HasPrefix(u.BaseURL, "https://") {
				add(p+".base_url", "upstream %q: base_url must start with http:// or https://", name)
			} else if u.H2C && !strings.HasPrefix(u.BaseURL, "http://") {
				add(p+".h2c", "upstream %q: h2c is unencrypted HTTP/2 and needs an http:// base_url (https:// upstreams negotiate HTTP/2 themselves)", name)
			}
		case ProtocolFixture:
			if fu.H2C {
				add(p+".h2c", "upstream %q: h2c is for upstreams reached over the network, not protocol fixture", name)
			}
			if fu.Fixture.TTFT != "" {
				d, err := time.ParseDuration(fu.Fixture.TTFT)
				if err != nil || d < 0 {
					add(p+".fixture.ttft", "upstream %q: fixture.ttft must be a duration such as 200ms", name)
				}
				u.FixtureTTFT = d
			}
			u.FixtureTPS = fu.Fixture.TPS
		case "":
			add(p, "upstream %q: protocol is required (openai, anthropic, gemini or fixture)", name)
		default:
			add(p+".protocol", "upstream %q: unknown protocol %q (want openai, anthropic, gemini or fixture)", name, fu.Protocol)
		}
		for field, src := range map[string]struct {
			v   string
			dst *time.Duration
		}{
			"connect":    {fu.Timeouts.Connect, &u.Timeouts.Connect},
			"first_byte": {fu.Timeouts.FirstByte, &u.Timeouts.FirstByte},
			"idle":       {fu.Timeouts.Idle, &u.Timeouts.Idle},
		} {
			if src.v == "" {
				continue
			}
			d, err := time.ParseDuration(src.v)
			if err != nil || d <= 0 {
				add(p+".timeouts."+field, "upstream %q: timeouts.%s must be a positive duration such as 30s", name, field)
				continue
			}
			*src.dst = d
		}
		if len(fu.Models) == 0 {
			add(p, "upstream %q: declare the backend models it serves under models:", name)
		}
		for mname, m := range fu.Models {
			mp := p + ".models." + mname
			if m.ContextLength < 0 || m.MaxCompletionTokens < 0 {
				add(mp, "model %q: limits must not be negative", mname)
			}
			if m.ContextLength > 0 && m.MaxCompletionTokens > m.ContextLength {
				add(mp, "model %q: max_completion_tokens exceeds context_length", mname)
			}
			u.Models[mname] = Model{ContextLength: m.ContextLength, MaxCompletionTokens: m.MaxCompletionTokens}
		}
		cfg.Upstreams[name] = u
	}

	routes, def, hasDefault := map[llm.RequestType]map[llm.Tier][]Candidate{}, []Candidate(nil), false
	for key, node := range fc.Routes {
		p := "routes." + key
		if key == "default" {
			// A default whose candidates are all wrong is reported as
			// such, not as missing.
			def, hasDefault = candidates(cfg, p, &node, add), true
			continue
		}
		t := llm.RequestType(key)
		if !t.Valid() {
			add(p, "unknown request type %q in routes (want default or one of %s)", key, typeList())
			continue
		}
		routes[t] = map[llm.Tier][]Candidate{}
		switch node.Kind {
		case yaml.SequenceNode, yaml.ScalarNode:
			cs := candidates(cfg, p, &node, add)
			for _, tier := range llm.Tiers {
				routes[t][tier] = cs
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(node.Content); i += 2 {
				tier := llm.Tier(node.Content[i].Value)
				tp := p + "." + node.Content[i].Value
				if !validTier(tier) {
					add(tp, "unknown tier %q (want low, medium or high)", tier)
					continue
				}
				routes[t][tier] = candidates(cfg, tp, node.Content[i+1], add)
			}
		default:
			add(p, "route %q must be a list of upstream/model candidates or a map of tiers", key)
		}
	}
	if !hasDefault {
		// Without a default, every pair must be routed explicitly.
		var missing []string
		for _, t := range llm.RequestTypes {
			for _, tier := range llm.Tiers {
				if len(routes[t][tier]) == 0 {
					missing = append(missing, string(t)+"/"+string(tier))
				}
			}
		}
		switch {
		case len(fc.Routes) == 0:
			add("routes", "no routes: write routes.default: [upstream/model, …], then routes per request type as needed")
		case len(missing) > 0:
			add("routes", "no routes.default, and no route for %s", strings.Join(missing, ", "))
		}
	}
	cfg.Routes = fill(routes, def)

	cfg.Prices = map[llm.RequestType]map[llm.Tier]Price{}
	var defPrices map[llm.Tier]Price
	for key, node := range fc.Prices {
		p := "prices." + key
		typ := llm.RequestType(key)
		if key != "default" && !typ.Valid() {
			add(p, "unknown request type %q in prices (want default or one of %s)", key, typeList())
			continue
		}
		perTier := map[llm.Tier]Price{}
		var fp filePrice
		if node.Kind == yaml.MappingNode && !tierKeys(&node) {
			if !shapeOK(&node, reflect.TypeFor[filePrice](), p, add) {
				continue
			}
			if err := node.Decode(&fp); err != nil {
				add(p, "%s: %v", p, err)
				continue
			}
			pr, ok := price(p, fp, add)
			if !ok {
				continue
			}
			for _, tier := range llm.Tiers {
				perTier[tier] = pr
			}
		} else if node.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(node.Content); i += 2 {
				tier := llm.Tier(node.Content[i].Value)
				tp := p + "." + node.Content[i].Value
				if !validTier(tier) {
					add(tp, "unknown tier %q (want low, medium or high)", tier)
					continue
				}
				var fp filePrice
				if !shapeOK(node.Content[i+1], reflect.TypeFor[filePrice](), tp, add) {
					continue
				}
				if err := node.Content[i+1].Decode(&fp); err != nil {
					add(tp, "%s: %v", tp, err)
					continue
				}
				if pr, ok := price(tp, fp, add); ok {
					perTier[tier] = pr
				}
			}
		} else {
			add(p, "prices.%s must be a price (input, output, …) or a map of tiers to prices", key)
			continue
		}
		if key == "default" {
			defPrices = perTier
			continue
		}
		cfg.Prices[typ] = perTier
	}
	// The default price fills every tier a type does not price itself.
	for _, t := range llm.RequestTypes {
		for tier, pr := range defPrices {
			if cfg.Prices[t] == nil {
				cfg.Prices[t] = map[llm.Tier]Price{}
			}
			if _, ok := cfg.Prices[t][tier]; !ok {
				cfg.Prices[t][tier] = pr
			}
		}
	}
	if fl.MaxBodyBytes < 0 || fl.RPM < 0 || fl.TPM < 0 || fl.MaxMessages < 0 || fl.MaxParts < 0 ||
		fl.MaxTools < 0 || fl.MaxSchemaBytes < 0 || fl.ReserveOutputTokens < 0 {
		add("limits", "limits must not be negative (0 keeps the default)")
	}
	if fl.BodyMinRate < 0 {
		add("limits.body_min_rate", "limits.body_min_rate must not be negative (bytes per second; 0 keeps the default)")
	}
	if fl.MaxConnections < 0 {
		add("limits.max_connections", "limits.max_connections must not be negative (0 derives it from the file-descriptor limit)")
	}
	for _, f := range []struct {
		key, v string
		dst    *time.Duration
	}{
		{"budget_refresh", fl.BudgetRefresh, &cfg.Limits.BudgetRefresh},
		{"body_timeout", fl.BodyTimeout, &cfg.Limits.BodyTimeout},
		{"header_timeout", fl.HeaderTimeout, &cfg.Limits.HeaderTimeout},
		{"idle_timeout", fl.IdleTimeout, &cfg.Limits.IdleTimeout},
	} {
		if f.v == "" {
			continue
		}
		d, err := time.ParseDuration(f.v)
		if err != nil || d <= 0 {
			add("limits."+f.key, "limits.%s must be a positive duration such as 10s", f.key)
			continue
		}
		*f.dst = d
	}
	if v := fc.Retention.Generations; v != "" {
		d, err := ParseRetention(v)
		if err != nil {
			add("retention.generations", "retention.generations: %v", err)
		}
		cfg.Retention.Generations = d
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return cfg, nil
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

// shapeOK runs checkShape on a free-form part of the file (a price),
// reporting through add; it reports whether there was nothing to report.
func shapeOK(n *yaml.Node, t reflect.Type, path string, add func(string, string, ...any)) bool {
	ok := true
	checkShape(n, t, path, func(line int, format string, args ...any) {
		errsAt(add, line, format, args...)
		ok = false
	})
	return ok
}

var defaultBaseURL = map[string]string{
	ProtocolAnthropic: "https://api.anthropic.com",
	ProtocolGemini:    "https://generativelanguage.googleapis.com",
}

// candidates reads a list of "upstream/model" strings (or one string).
func candidates(cfg *Config, path string, n *yaml.Node, add func(string, string, ...any)) []Candidate {
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	case yaml.SequenceNode:
		items = n.Content
	default:
		add(path, "expected a list of upstream/model candidates")
		return nil
	}
	var out []Candidate
	for i := 0; i < len(items); i++ {
		it := items[i]
		if it.Kind == yaml.SequenceNode {
			// A nested list is a group of equals.
			group := fmt.Sprintf("%s[%d]", path, i)
			for _, c := range candidates(cfg, path, it, add) {
				c.Group = group
				out = append(out, c)
			}
			continue
		}
		up, model, ok := strings.Cut(it.Value, "/")
		if it.Kind != yaml.ScalarNode || !ok || up == "" || model == "" {
			errsAt(add, it.Line, "candidate %q must be written upstream/model", it.Value)
			continue
		}
		u := cfg.Upstreams[up]
		switch {
		case u == nil:
			errsAt(add, it.Line, "candidate %q: no upstream named %q", it.Value, up)
			continue
		case len(u.Models) > 0:
			if _, ok := u.Models[model]; !ok {
				errsAt(add, it.Line, "candidate %q: upstream %q declares no model %q", it.Value, up, model)
				continue
			}
		}
		out = append(out, Candidate{Upstream: up, Model: model})
	}
	if len(out) == 0 && len(items) == 0 {
		add(path, "empty candidate list")
	}
	return out
}

// errsAt reports at an explicit line (candidates know their own node), via
// the "#line:N" pseudo-path that Load's add resolves.
func errsAt(add func(string, string, ...any), line int, format string, args ...any) {
	add(fmt.Sprintf("#line:%d", line), format, args...)
}

func price(path string, fp filePrice, add func(string, string, ...any)) (Price, bool) {
	var pr Price
	ok := true
	parse := func(field, v string, required bool) *apd.Decimal {
		if v == "" {
			if required {
				add(path, "%s: %s is required", path, field)
				ok = false
			}
			return nil
		}
		d, _, err := apd.NewFromString(v)
		if err != nil || d.Form != apd.Finite || d.Negative {
			add(path+"."+field, "%s.%s: %q is not a non-negative decimal (USD per million tokens)", path, field, v)
			ok = false
			return nil
		}
		return d
	}
	if d := parse("input", fp.Input, true); d != nil {
		pr.Input = *d
	}
	if d := parse("output", fp.Output, true); d != nil {
		pr.Output = *d
	}
	pr.CachedInput = parse("cached_input", fp.CachedInput, false)
	pr.CacheWrite = parse("cache_write", fp.CacheWrite, false)
	pr.CacheWrite1h = parse("cache_write_1h", fp.CacheWrite1h, false)
	return pr, ok
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

var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError turns the YAML library's errors into Errors with lines.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var es Errors
		for _, m := range te.Errors {
			es = append(es, lineError(m))
		}
		return es
	}
	return Errors{lineError(err.Error())}
}

func lineError(msg string) *Error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		return &Error{Line: line, Msg: m[2]}
	}
	return &Error{Msg: msg}
}

// walk visits every node.
func walk(n *yaml.Node, f func(*yaml.Node)) {
	f(n)
	for _, c := range n.Content {
		walk(c, f)
	}
}

// lineIndex maps dotted key paths (upstreams.openai.base_url) to the line of
// their key.
func lineIndex(root *yaml.Node) map[string]int {
	lines := map[string]int{}
	var visit func(n *yaml.Node, path string)
	visit = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				visit(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				lines[p] = n.Content[i].Line
				visit(n.Content[i+1], p)
			}
		}
	}
	visit(root, "")
	return lines
}
