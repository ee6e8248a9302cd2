package admin_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/svcgw/svcgw/surfaces/admin"
)

// TestRoutes_Documented: docs/admin-api.md lists every route of the
// management API, in its order, with what Routes says it serves.
func TestRoutes_Documented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/admin-api.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| ") && strings.Contains(line, "`/admin/v1/") {
			rows = append(rows, line)
		}
	}
	routes := admin.New(nil, nil, nil).Routes()
	if len(rows) != len(routes) {
		t.Fatalf("docs/admin-api.md lists %d routes, Routes %d", len(rows), len(routes))
	}
	for i, rt := range routes {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		want := "| " + method + " | `" + path + "` | " + rt.Serves + " |"
		if rows[i] != want {
			t.Errorf("docs/admin-api.md route %d:\n got  %s\n want %s", i+1, rows[i], want)
		}
	}
}

// TestOpenAPI_CoversEveryRoute: the OpenAPI document describes every
// route Routes serves, and no other.
func TestOpenAPI_CoversEveryRoute(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(admin.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	described := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				described[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	for _, rt := range admin.New(nil, nil, nil).Routes() {
		if !described[rt.Pattern] {
			t.Errorf("openapi.json does not describe %s", rt.Pattern)
		}
		delete(described, rt.Pattern)
	}
	for op := range described {
		t.Errorf("openapi.json describes %s, which is not served", op)
	}
}
