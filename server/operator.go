package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/svcgw/svcgw/surfaces/admin"
	"github.com/svcgw/svcgw/surfaces/dashboard"
)

// Routes of the operator's page on the admin listener (docs/operator.md):
// the page and its files are served without a token, as a browser
// navigating to them sends none; everything the page shows it reads from
// the management API with the admin token it signs in with.
//
//	GET /admin/                 the operator's page
//	GET /admin/assets/{name...} its script, style and chart library
//	GET /admin/token            the admin token of the request: its name and
//	                            whether it is read-only (what the page shows
//	                            and which controls it offers)
const operatorTokenPath = "/admin/token"

// mountOperator adds the operator's page and its routes to the admin
// listener's mux; without the embedded files (s.dashboard nil) only
// GET /admin/token is served.
func (s *Server) mountOperator(mux *http.ServeMux) {
	if s.dashboard != nil {
		mux.Handle("GET "+dashboard.OperatorPrefix+"{$}", s.dashboard.OperatorPage())
		mux.Handle("GET /admin", http.RedirectHandler(dashboard.OperatorPrefix, http.StatusMovedPermanently))
		mux.Handle("GET "+dashboard.OperatorAssetPrefix+"{name...}", s.dashboard.Assets(http.NotFoundHandler()))
	}
	mux.HandleFunc("GET "+operatorTokenPath, func(w http.ResponseWriter, r *http.Request) {
		t, ok := admin.TokenFrom(r.Context())
		if !ok { // admin.Guard admits no request here without a token
			writeAdminJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "unauthorized", "message": "missing admin token"}})
			return
		}
		writeAdminJSON(w, http.StatusOK, struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			ReadOnly  bool   `json:"read_only"`
			CreatedAt string `json:"created_at"`
		}{t.ID, t.Name, t.ReadOnly, t.CreatedAt.UTC().Format(time.RFC3339)})
	})
}

// operatorOpen reports whether r asks for the operator's page or one of
// its files, which need no admin token: they are the same bytes for
// everyone and hold no data.
func operatorOpen(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == dashboard.OperatorPrefix || p == "/admin" || strings.HasPrefix(p, dashboard.OperatorAssetPrefix)
}
