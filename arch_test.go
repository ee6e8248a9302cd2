package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowed lists, for each package of the module, the module packages it
// imports (docs/architecture.md's package table: top may import bottom,
// never the reverse); an arrow nothing uses is an error too. "surfaces/*"
// stands for any wire-format surface: a new one needs no line here, and may
// import only the contract and llm.
var allowed = map[string][]string{
	"":                    {"cli"},
	"cli":                 {"server", "store", "store/sqlite", "store/postgres", "config", "billing", "llm", "upstream", "upstream/openai", "upstream/anthropic", "upstream/gemini", "upstream/fixture", "surfaces/account", "seal", "money", "internal/logtext", "internal/telemetry"},
	"server":              {"surfaces/*", "classify", "upstream", "billing", "store", "seal", "money", "llm", "internal/logtext", "internal/telemetry"},
	"surfaces/*":          {"surfaces/surface", "llm"}, // chat, messages, gencontent and any surface to come
	"surfaces/surface":    {"llm"},                     // the Codec contract between server and the surfaces
	"surfaces/chat":       {"surfaces/surface", "llm"},
	"surfaces/messages":   {"surfaces/surface", "llm"},
	"surfaces/gencontent": {"surfaces/surface", "llm"},
	"surfaces/account":    {"store", "money", "llm"},
	"surfaces/admin":      {"store", "money", "llm", "surfaces/account"}, // the management API, reusing the account endpoints' shapes
	"surfaces/dashboard":  {},                                            // the embedded browser page: files only
	"classify":            {"llm"},
	"upstream":            {"llm"}, // Backend, Router, errors; never its own subpackages
	"upstream/openai":     {"upstream", "upstream/internal/protocol", "llm"},
	"upstream/anthropic":  {"upstream", "upstream/internal/protocol", "llm"},
	"upstream/gemini":     {"upstream", "upstream/internal/protocol", "llm"},
	"upstream/fixture":    {"upstream", "llm"},
	"billing":             {"money", "llm"},
	"store":               {"money"}, // the policy and the engine contract (DB, Engine, Register, Dial)
	"store/sqlite":        {"store"}, // the SQLite engine
	// the PostgreSQL engine; svcgw db copy reads the SQLite database it
	// copies through store/sqlite
	"store/postgres": {"store", "store/sqlite"},
	// the engines' conformance suite, imported by their tests only
	"store/storetest":   {"store", "money"},
	"config":            {"llm"},
	"llm":               {},
	"money":             {},      // the one money type: micro-dollars (apd only)
	"seal":              {},      // authenticated encryption of caller-held tokens (golang.org/x/crypto only)
	"internal/golden":   {"llm"}, // golden-file helpers, imported by the surfaces' tests only
	"internal/pgtest":   {},      // a throwaway PostgreSQL for tests, imported by tests only
	"internal/testfill": {},      // values filled for encoder tests, imported by tests only
	"internal/logtext":  {},      // the log handler: slog.TextHandler's bytes, cheaper
	"deploy":            {},      // tests only: the Kubernetes manifests and the systemd unit
	// the operator's traces: OTLP export, the GenAI spans, upstream.Tracer
	"internal/telemetry": {"upstream", "llm"},
	// a Jaeger for tests, built and started by the test binary, imported by tests only
	"internal/jaegertest": {},
	// a recording embeddings upstream, imported by tests and embedup only
	"internal/embedrecorder": {},
	// scripts/clients/verify.sh's recording upstream and proxies
	"scripts/clients/embedup": {"internal/embedrecorder", "llm"},

	// what the vendor protocols share: HTTP transport, SSE reader, frame
	// decoder, stop sequences, translation helpers
	"upstream/internal/protocol": {"upstream", "llm"},
	// the protocol backends' test helpers and conformance suite, imported by
	// their tests only
	"upstream/internal/protocoltest": {"upstream", "upstream/internal/protocol", "llm"},
}

// forbiddenStd are standard packages a module package must not import.
var forbiddenStd = map[string][]string{
	"store":          {"net/http"},
	"store/sqlite":   {"net/http"},
	"store/postgres": {"net/http"},
	"billing":        {"net/http"},
	"money":          {"net/http"},
	"classify":       {"net/http"},
	"llm":            {"net/http"},
}

func TestArchitecture_ImportsFollowDesign(t *testing.T) {
	const module = "github.com/svcgw/svcgw"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	used := map[string]bool{} // "pkg → dep" for every import in the module
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkgPath, imports, _ := strings.Cut(line, ":")
		pkg := strings.TrimPrefix(strings.TrimPrefix(pkgPath, module), "/")
		used[pkg] = true
		ok, known := allowed[pkg]
		if !known && strings.HasPrefix(pkg, "surfaces/") {
			ok, known = allowed["surfaces/*"]
		}
		if !known {
			t.Errorf("package %q is not in docs/architecture.md's table (add it to allowed)", pkg)
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, module+"/") {
				for _, f := range forbiddenStd[pkg] {
					if imp == f {
						t.Errorf("%s imports %s", pkgPath, imp)
					}
				}
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			used[pkg+" → "+dep] = true
			if !contains(ok, dep) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow", pkgPath, imp)
			}
		}
	}
	// The table is the design as built: an arrow nothing uses, or a row for
	// a package that is gone, is a stale line to remove (here and in
	// docs/architecture.md). "surfaces/*" stands for surfaces to come.
	for pkg, deps := range allowed {
		if pkg == "surfaces/*" {
			continue
		}
		if !used[pkg] {
			t.Errorf("allowed has a row for %q, which is not a package of the module", pkg)
			continue
		}
		for _, dep := range deps {
			if dep != "surfaces/*" && !used[pkg+" → "+dep] {
				t.Errorf("allowed lets %q import %q, which it does not: remove the arrow", pkg, dep)
			}
		}
	}
}

// contains reports whether list allows s; "surfaces/*" allows any surface.
func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s || v == "surfaces/*" && strings.HasPrefix(s, "surfaces/") {
			return true
		}
	}
	return false
}
