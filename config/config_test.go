package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"
	"go.yaml.in/yaml/v3"

	"github.com/svcgw/svcgw/llm"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var fullEnv = env(map[string]string{"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a", "GEMINI_API_KEY": "g-k"})

func TestLoad_FullExample(t *testing.T) {
	is := is.New(t)
	doc, err := os.ReadFile("testdata/full.yaml")
	is.NoErr(err)
	cfg, err := Load(doc, fullEnv)
	is.NoErr(err) // the README's example is valid

	is.Equal(len(cfg.Upstreams), 3)
	is.Equal(cfg.Upstreams["openai"].APIKey, "sk-o")                                       // ${ENV} expanded
	is.Equal(cfg.Upstreams["anthropic"].BaseURL, "https://api.anthropic.com")              // vendor default
	is.Equal(cfg.Upstreams["gemini"].BaseURL, "https://generativelanguage.googleapis.com") // vendor default
	is.Equal(cfg.Upstreams["openai"].Timeouts.FirstByte.String(), "1m0s")
	is.Equal(cfg.Upstreams["gemini"].Models["gemini-2.5-pro"].ContextLength, 1048576)

	is.Equal(cfg.Routes[llm.TypeFlash][llm.TierLow][0], Candidate{Upstream: "gemini", Model: "gemini-2.5-flash"}) // explicit type route, all tiers
	is.Equal(len(cfg.Routes[llm.TypeFlash][llm.TierHigh]), 2)
	is.Equal(cfg.Routes[llm.TypeReason][llm.TierLow][0].Model, "gpt-4.1-mini") // per-tier route
	is.Equal(len(cfg.Routes[llm.TypeReason][llm.TierHigh]), 2)
	code := cfg.Routes[llm.TypeCode][llm.TierMedium] // default fills the rest
	is.Equal(len(code), 3)
	is.Equal(code[0].String(), "openai/gpt-4.1")
	is.True(code[0].Group != "" && code[0].Group == code[1].Group) // equals
	is.Equal(code[2].Group, "")                                    // plain fallback
	for _, typ := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			is.True(len(cfg.Routes[typ][tier]) > 0) // every pair routed
		}
	}
	is.Equal(cfg.Routes[llm.TypeEmbedding][llm.TierMedium], []Candidate{{Upstream: "openai", Model: "text-embedding-3-small"}})

	flashLow := cfg.Prices[llm.TypeFlash][llm.TierLow]
	is.Equal(flashLow.Input.String(), "0.10")
	proMed := cfg.Prices[llm.TypePro][llm.TierMedium]
	is.Equal(proMed.Output.String(), "10") // default price
	is.Equal(cfg.Prices[llm.TypeReason][llm.TierHigh].CacheWrite1h.String(), "6")
	embedHigh := cfg.Prices[llm.TypeEmbedding][llm.TierHigh]
	is.Equal(embedHigh.Input.String(), "0.02") // input only, and not the default's
	reasonLow := cfg.Prices[llm.TypeReason][llm.TierLow]
	is.Equal(reasonLow.Input.String(), "1.25") // default for unpriced tiers
	is.Equal(cfg.Limits.RPM, 600)
	is.Equal(cfg.Limits.FreeBytesPerMinute, int64(8<<20))
	is.Equal(cfg.Limits.BodyTimeout.String(), "20s")
	is.Equal(cfg.Limits.BodyMinRate, int64(1024))
	is.Equal(cfg.Limits.HeaderTimeout.String(), "10s")
	is.Equal(cfg.Limits.IdleTimeout.String(), "2m0s")
	is.Equal(cfg.Limits.MaxConnections, 4096)
}

func TestLoad_ErrorsNameTheirLine(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		env       map[string]string
		line      int
		want      string
	}{
		{"unknown key", "upstreams:\n  a:\n    protocol: openai\n    base_ur: http://x\n", nil, 4, "base_ur"},
		{"a negative limit names its key", "limits:\n  max_tools: 3\n  rpm: -5\n", nil, 3, "limits.rpm must not be negative"},
		{"another negative limit", "limits:\n  free_bytes_per_minute: -1\n", nil, 2, "limits.free_bytes_per_minute must not be negative"},
		{"a tab says what it is", "limits:\n\trpm: 5\n", nil, 2, "(a tab? YAML indents with spaces only)"},
		{"unknown protocol", "upstreams:\n  a:\n    protocol: grpc\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 3, "unknown protocol"},
		{"missing env", "upstreams:\n  a:\n    protocol: openai\n    base_url: http://x\n    api_key: ${NOPE}\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 5, "NOPE"},
		{"unknown upstream in route", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\n  flash:\n    - b/m\n", nil, 8, `no upstream named "b"`},
		{"undeclared model", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/other]\n", nil, 6, "declares no model"},
		{"bad candidate", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [am]\n", nil, 6, "upstream/model"},
		{"unknown type", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\n  fast: [a/m]\n", nil, 7, "unknown request type"},
		{"unknown tier", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\n  pro:\n    extreme: [a/m]\n", nil, 8, "unknown tier"},
		{"bad price", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\nprices:\n  flash:\n    input: \"-1\"\n    output: \"1\"\n", nil, 9, "non-negative"},
		{"bad timeout", "upstreams:\n  a:\n    protocol: openai\n    base_url: http://x\n    timeouts:\n      idle: soon\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 6, "duration"},
		{"no default and gaps", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  flash: [a/m]\n", nil, 5, "reason/high, pro/low"},
		{"wrong type", "limits:\n  rpm: lots\n", nil, 2, `limits.rpm: want a whole number, not "lots"`},
		{"no routes", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\n", nil, 0, "no routes: write routes.default"},
		{"bad body timeout", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\nlimits:\n  rpm: 5\n  body_timeout: slow\n", nil, 9, "limits.body_timeout must be a positive duration"},
		{"bad idle timeout", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\nlimits:\n  idle_timeout: -1s\n", nil, 8, "limits.idle_timeout"},
		{"negative connection cap", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\nlimits:\n  max_connections: -1\n", nil, 8, "max_connections"},
		{"negative body rate", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\nlimits:\n  body_min_rate: -1\n", nil, 8, "body_min_rate"},
		{"h2c over https", "upstreams:\n  a:\n    protocol: openai\n    base_url: https://x/v1\n    h2c: true\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 5, "h2c is unencrypted HTTP/2 and needs an http:// base_url"},
		{"h2c on the fixture", "upstreams:\n  a:\n    protocol: fixture\n    h2c: true\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 4, "h2c is for upstreams reached over the network"},
		{"negative embed_batch", "upstreams:\n  a:\n    protocol: openai\n    base_url: http://x/v1\n    embed_batch: -1\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 5, "embed_batch must be a positive number of inputs"},
		{"embed_batch on anthropic", "upstreams:\n  a:\n    protocol: anthropic\n    embed_batch: 8\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 4, "anthropic has no embeddings"},
		{"embed_batch on the fixture", "upstreams:\n  a:\n    protocol: fixture\n    embed_batch: 8\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 4, "not protocol fixture"},
		{"embeddings routed to a protocol without them", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\n  claude:\n    protocol: anthropic\n    models: {c: {}}\nroutes:\n  default: [a/m]\n  embedding:\n    low: [a/m, claude/c]\n", nil, 11,
			`candidate "claude/c" in routes.embedding.low: upstream "claude" speaks the anthropic protocol, which has no embeddings endpoint`},
		{"syntax", "upstreams: [\n", nil, 1, "did not find"},
		{"bad optional bool", "upstreams:\n  a:\n    protocol: openai\n    base_url: http://x\n    prompt_cache_key: maybe\n    models: {m: {}}\nroutes:\n  default: [a/m]\n", nil, 5, `upstreams.a.prompt_cache_key: want true or false, not "maybe"`},
		{"map key not a name", "upstreams:\n  ? [a]\n  : {protocol: fixture}\n", nil, 2, "upstreams: want a name as the key, not a list"},
		{"list holds itself", "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: &d\n    - a/m\n    - [a/m, *d]\n", nil, 8, "candidate *d: a list of candidates cannot hold itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, err := Load([]byte(tc.doc), env(tc.env))
			is.True(err != nil) // rejected
			var errs Errors
			ok := false
			if e, isErrs := err.(Errors); isErrs {
				errs, ok = e, true
			}
			is.True(ok) // Errors
			found := false
			for _, e := range errs {
				if e.Line == tc.line && strings.Contains(e.Msg, tc.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want an error at line %d containing %q, got:\n%v", tc.line, tc.want, err)
			}
		})
	}
}

func TestLoad_EmbeddingRoutes(t *testing.T) {
	ups := "upstreams:\n  fx:\n    protocol: fixture\n    models: {m: {}}\n  oa:\n    protocol: openai\n    base_url: http://x/v1\n    models: {gpt: {}, emb: {}}\n"
	t.Run("the default's fixture candidates serve embeddings when no route is written", func(t *testing.T) {
		is := is.New(t)
		cfg, err := Load([]byte(ups+"routes:\n  default: [oa/gpt, fx/m]\n"), env(nil))
		is.NoErr(err)
		for _, tier := range llm.Tiers {
			is.Equal(cfg.Routes[llm.TypeEmbedding][tier], []Candidate{{Upstream: "fx", Model: "m"}})
		}
		is.Equal(len(cfg.Routes[llm.TypePro][llm.TierLow]), 2)
	})
	t.Run("a vendor's default model never serves embeddings: not offered", func(t *testing.T) {
		is := is.New(t)
		cfg, err := Load([]byte(ups+"routes:\n  default: [oa/gpt]\n"), env(nil))
		is.NoErr(err)
		is.Equal(len(cfg.Routes[llm.TypeEmbedding][llm.TierMedium]), 0)
	})
	t.Run("a written route, per tier", func(t *testing.T) {
		is := is.New(t)
		cfg, err := Load([]byte(ups+"routes:\n  default: [oa/gpt]\n  embedding:\n    high: [oa/emb]\n"), env(nil))
		is.NoErr(err)
		is.Equal(cfg.Routes[llm.TypeEmbedding][llm.TierHigh], []Candidate{{Upstream: "oa", Model: "emb"}})
		is.Equal(len(cfg.Routes[llm.TypeEmbedding][llm.TierLow]), 0)
	})
	t.Run("prices.default prices generation, not embeddings", func(t *testing.T) {
		is := is.New(t)
		cfg, err := Load([]byte(ups+"routes:\n  default: [fx/m]\nprices:\n  default: {input: \"1\", output: \"2\"}\n"), env(nil))
		is.NoErr(err)
		is.Equal(len(cfg.Prices[llm.TypeEmbedding]), 0) // the built-in price stands
		is.Equal(len(cfg.Prices[llm.TypePro]), 3)
	})
	t.Run("without a default, embeddings need no route", func(t *testing.T) {
		is := is.New(t)
		doc := ups + "routes:\n"
		for _, typ := range llm.RequestTypes[:len(llm.RequestTypes)-1] {
			doc += "  " + string(typ) + ": [oa/gpt]\n"
		}
		_, err := Load([]byte(doc), env(nil))
		is.NoErr(err)
	})
}

func TestLoad_EnvDefault(t *testing.T) {
	is := is.New(t)
	cfg, err := Load([]byte("upstreams:\n  local:\n    protocol: openai\n    base_url: ${LOCAL_URL:-http://127.0.0.1:11434/v1}\n    models: {llama3: {context_length: 8192}}\nroutes:\n  default: [local/llama3]\n"), env(nil))
	is.NoErr(err)
	is.Equal(cfg.Upstreams["local"].BaseURL, "http://127.0.0.1:11434/v1")
}

func TestDefault_FixtureServesEveryRoute(t *testing.T) {
	is := is.New(t)
	cfg := Default()
	for _, typ := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			is.Equal(cfg.Routes[typ][tier][0].Upstream, "fixture")
		}
	}
}

// TestLoad_READMEExamples keeps the README's configuration examples valid.
func TestLoad_READMEExamples(t *testing.T) {
	is := is.New(t)
	readme, err := os.ReadFile("../README.md")
	is.NoErr(err)
	blocks := strings.Split(string(readme), "```yaml\n")[1:]
	is.True(len(blocks) >= 2) // the upstreams example and the local one
	for i, b := range blocks {
		doc, _, _ := strings.Cut(b, "```")
		_, err := Load([]byte(doc), fullEnv)
		if err != nil {
			t.Errorf("README yaml block %d: %v", i+1, err)
		}
	}
}

func TestLoad_ReportsEveryErrorInOnePassInTheFilesTerms(t *testing.T) {
	is := is.New(t)
	doc := `upstreams:
  a:
    protocol: fixture
    models: {m: {}}
    timeout: {idle: 5s}
  b:
    protocol: grpc
    models: {m: {}}
routes:
  default: [a/other]
  flash: [a/m]
prices:
  flash: {inptu: "1", output: "2"}
limits:
  max_body_byte: 1000
  rpm: lots
  max_tools: [1]
`
	_, err := Load([]byte(doc), env(nil))
	var errs Errors
	is.True(errors.As(err, &errs)) // Errors
	var got []string
	for _, e := range errs {
		got = append(got, fmt.Sprintf("%d: %s", e.Line, e.Msg))
	}
	want := []string{
		`5: unknown key "timeout" in upstreams.a (did you mean timeouts?)`,
		`7: upstream "b": unknown protocol "grpc" (want openai, anthropic, gemini or fixture)`,
		`10: candidate "a/other": upstream "a" declares no model "other"`,
		`13: unknown key "inptu" in prices.flash (did you mean input?)`,
		`15: unknown key "max_body_byte" in limits (did you mean max_body_bytes?)`,
		`16: limits.rpm: want a whole number, not "lots"`,
		`17: limits.max_tools: want a whole number, not a list`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	for _, e := range errs {
		is.True(!strings.Contains(e.Msg, "struct"))         // no Go types
		is.True(!strings.Contains(e.Msg, "routes.default")) // no spurious missing default
	}
}

// TestLoad_KeyWrittenTwice: the second is reported at its line, and the
// rest of the file is read with the first, so nothing else is reported.
func TestLoad_KeyWrittenTwice(t *testing.T) {
	is := is.New(t)
	doc := "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\n    protocol: openai\n" +
		"routes:\n  default: [a/m]\n  pro: {low: [a/m], low: [a/m]}\n"
	_, err := Load([]byte(doc), env(nil))
	var errs Errors
	is.True(errors.As(err, &errs)) // Errors
	want := "line 5: mapping key \"protocol\" already defined at line 3\n" +
		"line 8: mapping key \"low\" already defined at line 8"
	is.Equal(errs.Error(), want)
}

func TestLoadFile_ErrorsNameTheFile(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "svcgw.yaml")
	is.NoErr(os.WriteFile(path, []byte("limits:\n  rpmm: 5\n"), 0o600))
	_, err := LoadFile(path)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), path+`:2: unknown key "rpmm" in limits (did you mean rpm?)`))
}

// TestREADME_DocumentsEveryKey keeps the README's reference complete: every
// key the file format has appears there, as `key` or in a dotted path.
func TestREADME_DocumentsEveryKey(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var visit func(t reflect.Type, path string)
	keys := map[string]string{} // key → where it is
	visit = func(rt reflect.Type, path string) {
		switch rt.Kind() {
		case reflect.Map:
			visit(rt.Elem(), path+".NAME")
		case reflect.Struct:
			if rt == reflect.TypeFor[yaml.Node]() {
				return
			}
			for _, k := range yamlKeys(rt) {
				f, _ := fieldByKey(rt, k)
				keys[k] = join(path, k)
				visit(f.Type, join(path, k))
			}
		}
	}
	visit(reflect.TypeFor[fileConfig](), "")
	visit(reflect.TypeFor[filePrice](), "prices.TYPE")
	if len(keys) < 25 {
		t.Fatalf("found only %d keys", len(keys))
	}
	words := regexp.MustCompile("`[^`]*`").FindAllString(string(readme), -1)
	for key, where := range keys {
		found := false
		for _, w := range words {
			w = strings.Trim(w, "`")
			if w == key || strings.HasSuffix(w, "."+key) || strings.Contains(w, "."+key+".") || strings.HasPrefix(w, key+".") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("README.md does not document %s", where)
		}
	}
}

func TestLoad_PromptCacheKeyDefaultsToOpenAIOnly(t *testing.T) {
	is := is.New(t)
	doc := "upstreams:\n" +
		"  openai:\n    protocol: openai\n    base_url: https://api.openai.com/v1\n    models: {m: {}}\n" +
		"  local:\n    protocol: openai\n    base_url: http://127.0.0.1:8000/v1\n    models: {m: {}}\n" +
		"  azure:\n    protocol: openai\n    base_url: https://x.openai.azure.com/openai/v1\n    prompt_cache_key: true\n    models: {m: {}}\n" +
		"  off:\n    protocol: openai\n    base_url: https://api.openai.com/v1\n    prompt_cache_key: false\n    models: {m: {}}\n" +
		"routes:\n  default: [openai/m]\n"
	cfg, err := Load([]byte(doc), env(nil))
	is.NoErr(err)
	is.True(cfg.Upstreams["openai"].PromptCacheKey) // OpenAI's own API takes it
	is.True(!cfg.Upstreams["local"].PromptCacheKey) // compatible servers may refuse unknown fields
	is.True(cfg.Upstreams["azure"].PromptCacheKey)  // unless the operator says otherwise
	is.True(!cfg.Upstreams["off"].PromptCacheKey)
}

func TestLoad_H2C(t *testing.T) {
	is := is.New(t)
	doc := "upstreams:\n" +
		"  vllm:\n    protocol: openai\n    base_url: http://127.0.0.1:8000/v1\n    h2c: true\n    models: {m: {}}\n" +
		"  local:\n    protocol: openai\n    base_url: http://127.0.0.1:8080/v1\n    models: {m: {}}\n" +
		"routes:\n  default: [vllm/m]\n"
	cfg, err := Load([]byte(doc), env(nil))
	is.NoErr(err)
	is.True(cfg.Upstreams["vllm"].H2C)   // asked for
	is.True(!cfg.Upstreams["local"].H2C) // HTTP/1.1 unless asked: most local servers speak nothing else
}

func TestLoad_EmbedBatch(t *testing.T) {
	is := is.New(t)
	doc := "upstreams:\n" +
		"  tei:\n    protocol: openai\n    base_url: http://127.0.0.1:8080/v1\n    embed_batch: 32\n    models: {bge: {}}\n" +
		"  gemini:\n    protocol: gemini\n    embed_batch: 50\n    models: {gemini-embedding-001: {}}\n" +
		"  openai:\n    protocol: openai\n    base_url: https://api.openai.com/v1\n    models: {text-embedding-3-small: {}}\n" +
		"routes:\n  default: [openai/text-embedding-3-small]\n  embedding: [tei/bge, gemini/gemini-embedding-001]\n"
	cfg, err := Load([]byte(doc), env(nil))
	is.NoErr(err)
	is.Equal(cfg.Upstreams["tei"].EmbedBatch, 32)
	is.Equal(cfg.Upstreams["gemini"].EmbedBatch, 50)
	is.Equal(cfg.Upstreams["openai"].EmbedBatch, 0) // the protocol's own limit
}

func TestLoad_Retention(t *testing.T) {
	base := "upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\n"
	for _, tc := range []struct {
		name, doc string
		want      time.Duration
		errLine   int
	}{
		{"absent: keep everything", base, 0, 0},
		{"days", base + "retention:\n  generations: 90d\n", 90 * 24 * time.Hour, 0},
		{"flow style", base + "retention: {generations: 30d}\n", 30 * 24 * time.Hour, 0},
		{"Go duration", base + "retention:\n  generations: 2160h\n", 90 * 24 * time.Hour, 0},
		{"zero keeps everything", base + "retention:\n  generations: 0\n", 0, 0},
		{"from the environment", base + "retention:\n  generations: ${KEEP:-7d}\n", 7 * 24 * time.Hour, 0},
		{"a missing unit", base + "retention:\n  generations: 90\n", 0, 8},
		{"under a day", base + "retention:\n  generations: 12h\n", 0, 8},
		{"negative", base + "retention:\n  generations: -5d\n", 0, 8},
		{"unknown key", base + "retention:\n  feedback: 30d\n", 0, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			cfg, err := Load([]byte(tc.doc), env(nil))
			if tc.errLine == 0 {
				is.NoErr(err)
				is.Equal(cfg.Retention.Generations, tc.want)
				return
			}
			var errs Errors
			is.True(errors.As(err, &errs))     // a configuration error
			is.Equal(errs[0].Line, tc.errLine) // at the line of the value
		})
	}
}

func TestParseRetention(t *testing.T) {
	is := is.New(t)
	for in, want := range map[string]time.Duration{"1d": 24 * time.Hour, "365d": 365 * 24 * time.Hour, "24h": 24 * time.Hour, "0": 0} {
		got, err := ParseRetention(in)
		is.NoErr(err)
		is.Equal(got, want)
	}
	for _, in := range []string{"", "d", "1.5d", "23h", "forever", "0d", "7w"} {
		_, err := ParseRetention(in)
		is.True(err != nil) // refused
	}
}

// FuzzLoad holds Load to its promises on any document: no panic, the same
// answer twice, every error at a line of the file and in the file's terms
// (none of the YAML decoder's words: checkShape must have reported, its
// own way, everything the decoder refuses), and a loaded config routes
// every type × tier.
func FuzzLoad(f *testing.F) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(full))
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range strings.Split(string(readme), "```yaml\n")[1:] {
		doc, _, _ := strings.Cut(b, "```")
		f.Add(doc)
	}
	for _, doc := range []string{
		"upstreams:\n  a:\n    protocol: openai\n    base_url: http://x\n    models: {m: {}}\n    prompt_cache_key: maybe\nroutes:\n  default: [a/m]\n",
		"upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\n  pro: {low: [[a/m], a/m], low: a/m}\n",
		"upstreams: &u\n  a: {protocol: fixture, models: {m: {}}}\nroutes: {default: *u}\nprices: {default: {input: 1, output: 2}, flash: {low: {input: 1}}}\n",
		"limits: {rpm: 1, rpm: 2, max_body_bytes: ${X:-5}}\nretention: {generations: 90d}\n",
		"upstreams: {? [a]: {protocol: openai}}\n",
		"upstreams: {a: {protocol: fixture, models: {m: {}}}}\nroutes: {default: &d [a/m, [*d]], pro: &p {low: *p}}\n",
	} {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		lookup := env(map[string]string{"OPENAI_API_KEY": "sk-o", "X": "7"})
		cfg, err := Load([]byte(doc), lookup)
		_, again := Load([]byte(doc), lookup)
		if fmt.Sprint(err) != fmt.Sprint(again) {
			t.Fatalf("two loads disagree:\n%v\n---\n%v", err, again)
		}
		if err == nil {
			for _, typ := range llm.RequestTypes {
				for _, tier := range llm.Tiers {
					// Embeddings may be not offered; generation is always routed.
					if len(cfg.Routes[typ][tier]) == 0 && typ != llm.TypeEmbedding {
						t.Fatalf("loaded, but %s/%s has no route", typ, tier)
					}
				}
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) {
			t.Fatalf("error is %T, not Errors: %v", err, err)
		}
		lines := strings.Count(doc, "\n") + 1
		for _, e := range errs {
			if e.Line < 0 || e.Line > lines+1 {
				t.Errorf("line %d of a %d-line file: %s", e.Line, lines, e.Msg)
			}
			if strings.Contains(e.Msg, "unmarshal") || strings.Contains(e.Msg, "!!") {
				t.Errorf("the decoder's words, not the file's: %d: %s", e.Line, e.Msg)
			}
		}
	})
}
