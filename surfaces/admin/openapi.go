package admin

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the management API as an OpenAPI 3.1 document, served at GET
// /admin/v1/openapi.json. TestOpenAPI_LiveResponses validates the live
// answers of every route against it.
//
//go:embed openapi.json
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(OpenAPI)
}
