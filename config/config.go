// Package config reads svcgw's YAML configuration file: the upstreams and
// the backend models each serves, the routes from request type × effort tier
// to ordered candidates, the caller's prices, limit defaults and how long
// detail is kept.
//
// Secrets come from the environment through ${VAR} (or ${VAR:-default})
// expansion inside string values; a referenced variable that is unset and
// has no default is an error. Errors name the line they come from, and one
// pass reports all of them.
//
// Load reads the file in two steps. The whole document is checked against
// the Go form it decodes into (shape.go: unknown keys, values of the wrong
// kind, keys written twice). Then each section is loaded by its own file —
// upstreams.go, routes.go, prices.go, limits.go, retention.go, telemetry.go — which holds
// the section's YAML form, its validated form and its rules, and returns
// its errors at the lines of the nodes they are about.
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
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/svcgw/svcgw/llm"
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
	// Telemetry says where traces go (see Telemetry).
	Telemetry Telemetry
}

// fileConfig is the YAML document as written: checkShape holds the file to
// it, and the README documents every key it has. Routes and prices are
// free-form here (a list or a map of tiers); routes.go and prices.go read
// them node by node.
type fileConfig struct {
	Upstreams map[string]fileUpstream `yaml:"upstreams"`
	Routes    map[string]yaml.Node    `yaml:"routes"`
	Prices    map[string]yaml.Node    `yaml:"prices"`
	Limits    fileLimits              `yaml:"limits"`
	Retention fileRetention           `yaml:"retention"`
	Telemetry fileTelemetry           `yaml:"telemetry"`
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

// addf adds an error at line (0: the error has no line).
func (es *Errors) addf(line int, format string, args ...any) {
	*es = append(*es, &Error{Line: line, Msg: fmt.Sprintf(format, args...)})
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
	def := []Candidate{{Upstream: "fixture", Model: "fixture"}}
	c.Routes = fill(nil, def, def)
	return c
}

// Load parses and validates a configuration document; lookupEnv resolves
// ${VAR} references. Its error is Errors: every error the document has,
// each at its line, in line order.
func Load(doc []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, Errors{syntaxError(err)}
	}
	var errs Errors
	// Keys written twice, unknown keys and wrong kinds, reported at their
	// lines in the file as written, all of them; loading goes on past them,
	// so one pass reports every error. This comes before ${VAR} expansion:
	// references belong in string values.
	dropDuplicates(&root, errs.addf)
	checkShape(&root, reflect.TypeFor[fileConfig](), "", errs.addf)
	errs = append(errs, expandEnv(&root, lookupEnv)...)
	var fc fileConfig
	// The decoder skips the values checkShape reported and decodes the rest,
	// which the sections validate too. A value it refuses that checkShape
	// did not report (FuzzLoad holds that there is none) still refuses the
	// file, in the decoder's words.
	if err := root.Decode(&fc); err != nil && len(errs) == 0 {
		return nil, Errors{{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}

	top := topLevel(&root)
	cfg := &Config{}
	var es Errors
	cfg.Upstreams, es = loadUpstreams(fc.Upstreams, field(top, "upstreams"))
	errs = append(errs, es...)
	cfg.Routes, es = loadRoutes(field(top, "routes"), cfg.Upstreams)
	errs = append(errs, es...)
	cfg.Prices, es = loadPrices(field(top, "prices"))
	errs = append(errs, es...)
	cfg.Limits, es = loadLimits(fc.Limits, field(top, "limits"))
	errs = append(errs, es...)
	cfg.Retention, es = loadRetention(fc.Retention, field(top, "retention"))
	errs = append(errs, es...)
	cfg.Telemetry, es = loadTelemetry(fc.Telemetry, field(top, "telemetry"))
	errs = append(errs, es...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv expands ${VAR} in every scalar value, where the node still
// knows its line; an unset variable without a default is an error there.
func expandEnv(n *yaml.Node, lookupEnv func(string) (string, bool)) Errors {
	var errs Errors
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if v, ok := lookupEnv(m[1]); ok && v != "" {
				return v
			}
			if m[2] != "" {
				return m[3]
			}
			errs.addf(n.Line, "environment variable %s is not set (write ${%s:-default} for a default)", m[1], m[1])
			return ""
		})
	}
	for _, c := range n.Content {
		errs = append(errs, expandEnv(c, lookupEnv)...)
	}
	return errs
}

// explainSyntax adds to a YAML parser's problem what its author most
// likely did, in the file's terms.
func explainSyntax(problem string) string {
	if strings.Contains(problem, "found character that cannot start any token") ||
		strings.Contains(problem, "found a tab character") {
		return problem + " (a tab? YAML indents with spaces only)"
	}
	return problem
}

// syntaxError is the YAML parser's refusal as an Error. It is the one error
// with no node to carry its line: the parser stopped before there was a
// tree. yaml.v3 has no structured parse error; it writes "yaml: line N:
// problem", so the line is read back from that. (v4's LoadError carries
// the line, but v4 is no drop-in: it puts the error of an unclosed flow
// list, "upstreams: [", on line 2 where v3 and the file's author say 1.)
func syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, problem, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(n); err == nil {
				return &Error{Line: line, Msg: explainSyntax(problem)}
			}
		}
	}
	return &Error{Msg: msg}
}
