package dashboard_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/surfaces/dashboard"
)

// serve mounts the handler as the server does and returns a test server.
func serve(t *testing.T) (*httptest.Server, *dashboard.Handler) {
	t.Helper()
	h, err := dashboard.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", h.Page())
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "fallback 404", http.StatusNotFound)
	})
	mux.Handle("GET "+dashboard.AssetPrefix+"{name...}", h.Assets(notFound))
	mux.Handle("GET "+dashboard.OperatorPrefix+"{$}", h.OperatorPage())
	mux.Handle("GET "+dashboard.OperatorAssetPrefix+"{name...}", h.Assets(notFound))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, h
}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gzip
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestPage_IsSelfContained(t *testing.T) {
	for _, tc := range []struct{ page, assets string }{
		{"/", dashboard.AssetPrefix},
		{dashboard.OperatorPrefix, dashboard.OperatorAssetPrefix},
	} {
		t.Run(tc.page, func(t *testing.T) { testSelfContained(t, tc.page, tc.assets) })
	}
}

// testSelfContained checks the page at path, whose files are under assets.
func testSelfContained(t *testing.T, path, assets string) {
	is := is.New(t)
	srv, h := serve(t)
	resp, page := get(t, srv.URL+path)
	is.Equal(resp.StatusCode, 200)
	is.Equal(resp.Header.Get("Content-Type"), "text/html; charset=utf-8")
	is.Equal(resp.Header.Get("Cache-Control"), "no-cache") // a new binary's page is always read
	csp := resp.Header.Get("Content-Security-Policy")
	is.True(strings.Contains(csp, "script-src 'self'"))      // no inline or foreign script
	is.True(strings.Contains(csp, "connect-src 'self'"))     // calls only its own gateway
	is.True(strings.Contains(csp, "frame-ancestors 'none'")) // never framed
	is.Equal(resp.Header.Get("Referrer-Policy"), "no-referrer")

	// Every file the page references is served, at this build's version,
	// from this origin: no CDN, nothing from the internet.
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(string(page), -1)
	is.True(len(refs) >= 4) // two scripts, two style sheets
	for _, m := range refs {
		ref := m[1]
		is.True(strings.HasPrefix(ref, assets))            // local
		is.True(strings.HasSuffix(ref, "?v="+h.Version())) // versioned
		resp, body := get(t, srv.URL+ref)
		is.Equal(resp.StatusCode, 200)
		is.True(len(body) > 0)
		is.Equal(resp.Header.Get("Cache-Control"), "public, max-age=31536000, immutable")
		is.Equal(resp.Header.Get("X-Content-Type-Options"), "nosniff")
	}
	is.True(!strings.Contains(string(page), "https://")) // nothing fetched from elsewhere
}

func TestAssets_CachingAndCompression(t *testing.T) {
	is := is.New(t)
	srv, h := serve(t)
	url := srv.URL + dashboard.AssetPrefix + "app.js"

	resp, plain := get(t, url+"?v=old")
	is.Equal(resp.StatusCode, 200)
	is.Equal(resp.Header.Get("Cache-Control"), "no-cache") // not this build's version: revalidate
	is.Equal(resp.Header.Get("Content-Type"), "text/javascript; charset=utf-8")

	resp, gz := get(t, url+"?v="+h.Version(), "Accept-Encoding", "br, gzip;q=0.8")
	is.Equal(resp.Header.Get("Content-Encoding"), "gzip")
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	is.NoErr(err)
	unzipped, err := io.ReadAll(zr)
	is.NoErr(err)
	is.Equal(unzipped, plain) // the same file
	is.True(len(gz) < len(plain))

	resp, _ = get(t, url, "Accept-Encoding", "gzip;q=0")
	is.Equal(resp.Header.Get("Content-Encoding"), "") // refused gzip

	etag := resp.Header.Get("ETag")
	is.True(etag != "")
	resp, body := get(t, url, "If-None-Match", etag)
	is.Equal(resp.StatusCode, http.StatusNotModified)
	is.Equal(len(body), 0)

	for _, name := range []string{"dashboard.go", "static/app.js", "vendor/uplot/README.md"} {
		resp, _ = get(t, srv.URL+dashboard.AssetPrefix+name)
		is.Equal(resp.StatusCode, 404) // only the page's files
	}
	for _, page := range []string{"index.html", "operator.html"} {
		resp, body = get(t, srv.URL+dashboard.AssetPrefix+page)
		is.Equal(resp.StatusCode, 404)
		is.Equal(strings.TrimSpace(string(body)), "fallback 404") // the server's own 404
	}

	resp, body = get(t, srv.URL+dashboard.AssetPrefix+"vendor/uplot/LICENSE")
	is.Equal(resp.StatusCode, 200) // the licence travels with the library
	is.True(strings.Contains(string(body), "MIT License"))
}
