package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcgw/svcgw/internal/golden"
)

// TestRoutes_Documented holds docs/routes.md to the route table: every
// method × path the caller address answers, with what answers it. A route
// added, removed or changed without the page fails here; go test
// ./server -run TestRoutes_Documented -update rewrites the page.
func TestRoutes_Documented(t *testing.T) {
	gw := newTestGateway(t)
	if gw.Server.dashboard == nil {
		t.Fatal("the dashboard's files did not load: the table would lack its routes")
	}
	var b bytes.Buffer
	b.WriteString(`# Routes

Every method × path svcgw answers on its caller address, in the order
` + "`server/routes.go`" + `'s route table lists them. The table is the one place
routes are declared: each inference surface contributes its codec's
` + "`Routes()`" + `, and everything else is a line of its own there. This page is
the table written out by ` + "`TestRoutes_Documented`" + `, which fails when the two
differ; ` + "`go test ./server -run TestRoutes_Documented -update`" + ` rewrites it.

"Key" is whether the route authenticates the caller (401 otherwise);
"envelope" is whose error envelope answers its failures ("caller's SDK":
the surface the request's headers point to, chat-completions when none
does). The admin listener's routes (metrics, readiness, pprof, reload)
are listed in ` + "`Server.Admin`" + ` (server/admin.go).

| method | path | key | envelope | serves |
|---|---|---|---|---|
`)
	for _, rt := range gw.Server.routes() {
		method, path, ok := strings.Cut(rt.pattern, " ")
		if !ok {
			method, path = "any", rt.pattern
		}
		key, envelope := "yes", "caller's SDK"
		switch {
		case rt.h == nil:
			key, envelope = "no", "—"
			if rt.pattern == "/" {
				envelope = "caller's SDK"
			}
		case rt.sf != nil:
			envelope = string(rt.sf.Surface())
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", method, path, key, envelope, rt.serves)
	}
	golden.At(t, "../docs/routes.md", b.Bytes(), func(want, got []byte) {
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("docs/routes.md is not the route table (-docs +table; rewrite it with -update):\n%s", d)
		}
	})
}
