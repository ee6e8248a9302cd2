package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
)

// TestDashboard_Routes pins where the page answers and that it leaves every
// other unknown path to the JSON 404.
func TestDashboard_Routes(t *testing.T) {
	gw := newTestGateway(t)
	for _, path := range []string{"/", "/svc/dashboard", "/svc/dashboard/"} {
		t.Run("page at "+path, func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, http.MethodGet, path, "", "Authorization", "")
			is.Equal(resp.StatusCode, 200) // no key needed for the page itself
			is.Equal(resp.Header.Get("Content-Type"), "text/html; charset=utf-8")
			is.True(strings.Contains(string(body), `<script defer src="/svc/dashboard/assets/app.js?v=`))
		})
	}
	t.Run("POST / is the API's 405", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodPost, "/", "")
		is.Equal(resp.StatusCode, 405)
		is.Equal(resp.Header.Get("Allow"), "GET, HEAD")
		surface, _ := envelopeKind(t, body)
		is.Equal(surface, "chat") // the JSON envelope, not a page
	})
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/index.html"},
		{http.MethodGet, "/svc"},
		{http.MethodGet, "/svc/dashboard/nope"},
		{http.MethodGet, "/svc/dashboard/assets/nope.js"},
		{http.MethodGet, "/dashboard"},
	} {
		t.Run(tc.method+" "+tc.path+" is the API's 404", func(t *testing.T) {
			is := is.New(t)
			resp, body := gw.do(t, tc.method, tc.path, "")
			is.Equal(resp.StatusCode, 404)
			surface, _ := envelopeKind(t, body)
			is.Equal(surface, "chat") // the JSON envelope, not a page
		})
	}
	t.Run("an asset", func(t *testing.T) {
		is := is.New(t)
		resp, body := gw.do(t, http.MethodGet, "/svc/dashboard/assets/vendor/uplot/uPlot.iife.min.js", "", "Authorization", "")
		is.Equal(resp.StatusCode, 200)
		is.True(strings.Contains(string(body), "uPlot"))
	})
}

// The dashboard's request-type filter offers every request type,
// embedding among them.
func TestDashboard_FilterOffersEveryRequestType(t *testing.T) {
	gw := newTestGateway(t)
	resp, body := gw.do(t, http.MethodGet, "/svc/dashboard", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	page := string(body)
	start := strings.Index(page, `<select id="f-type">`)
	end := strings.Index(page[start:], "</select>")
	if start < 0 || end < 0 {
		t.Fatal("no request-type filter on the page")
	}
	sel := page[start : start+end]
	for _, typ := range llm.RequestTypes {
		if !strings.Contains(sel, "<option>"+string(typ)+"</option>") {
			t.Errorf("the filter does not offer %s", typ)
		}
	}
}
