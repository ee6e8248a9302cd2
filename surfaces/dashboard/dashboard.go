// Package dashboard serves the page a key holder opens in a browser: their
// balance and spend against the caps, spend and requests per day, and their
// recent calls with feedback. The page, its script and style and the
// vendored chart library (uPlot, static/vendor/uplot) are embedded in the
// binary: nothing is fetched from elsewhere, and no build step is needed.
//
// The page signs in with an API key, keeps it in the tab's sessionStorage
// only, and calls the account endpoints with it (GET /svc/v1/credits,
// /svc/v1/usage, /svc/v1/generations, POST /svc/v1/feedback) in the
// Authorization header, so the key is never in a URL, a cookie or a log
// line. This package serves only files: it reads no key and no data.
//
// Assets are served under AssetPrefix with the build's content hash as ?v=,
// cached for a year when the hash matches, and gzipped for clients that
// take it. The page itself is never cached, so a new binary's page always
// loads its own assets.
//
// The operator's page (OperatorPage, static/operator.html and operator.js)
// is served on the admin listener, at OperatorPrefix, with its assets at
// OperatorAssetPrefix: it signs in with an admin token, kept the same way,
// and calls the management API (/admin/v1) on that same origin
// (docs/operator.md). Both pages load static/common.js first, the helpers
// they share.
//
// dashboard imports nothing of svcgw's; the server mounts it.
package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AssetPrefix is the path under which Assets serves the page's files.
const AssetPrefix = "/svc/dashboard/assets/"

// OperatorPrefix is where the admin listener serves the operator's page,
// and OperatorAssetPrefix where it serves the files that page loads (the
// same files Assets serves).
const (
	OperatorPrefix      = "/admin/"
	OperatorAssetPrefix = "/admin/assets/"
)

//go:embed static/index.html static/app.js static/app.css static/common.js
//go:embed static/operator.html static/operator.js static/operator.css
//go:embed static/vendor/uplot/uPlot.iife.min.js static/vendor/uplot/uPlot.min.css static/vendor/uplot/LICENSE
var static embed.FS

// contentSecurityPolicy lets the page load its own scripts, styles and
// images and call its own origin, and nothing else: no inline script, no
// framing, no form posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page and its assets. Create it with New.
type Handler struct {
	page     *asset
	operator *asset
	assets   map[string]*asset // by path below static/, e.g. "app.js"
	version  string
}

// asset is one embedded file, read, hashed and compressed at its first
// request: a gateway whose dashboard nobody opens holds none of it, and
// starting does not pay for compressing it (gzip at its best level makes
// ~1 MB of garbage a file).
type asset struct {
	name        string
	contentType string
	load        func() ([]byte, error) // the file's bytes as served

	once     sync.Once
	body, gz []byte // gz is nil when gzip does not make it smaller
	etag     string
	err      error
}

// New checks the embedded files and hashes them into the version asset
// URLs carry. It fails only if the embedded files are broken, which the
// package's tests rule out for a built binary.
func New() (*Handler, error) {
	h := &Handler{assets: make(map[string]*asset)}
	sum := sha256.New()
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		fmt.Fprintf(sum, "%s\x00%d\x00", name, len(b))
		sum.Write(b)
		if !strings.HasSuffix(name, ".html") {
			h.assets[name] = newAsset(name, func() ([]byte, error) { return static.ReadFile(p) })
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: load embedded files: %w", err)
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:16]
	h.page = h.newPage("index.html")
	h.operator = h.newPage("operator.html")
	return h, nil
}

// newPage is the page static/name, its asset references carrying the
// version, so a browser's cached copy is used exactly as long as it is
// this build's.
func (h *Handler) newPage(name string) *asset {
	return newAsset(name, func() ([]byte, error) {
		page, err := static.ReadFile("static/" + name)
		if err != nil {
			return nil, fmt.Errorf("dashboard: load page: %w", err)
		}
		return bytes.ReplaceAll(page, []byte("?v=VERSION"), []byte("?v="+h.version)), nil
	})
}

// contentTypes are the media types of the embedded files, by extension
// (mime.TypeByExtension would read the system's mime.types into the heap
// for these four).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	"":      "text/plain; charset=utf-8", // LICENSE
}

func newAsset(name string, load func() ([]byte, error)) *asset {
	ct, ok := contentTypes[path.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	return &asset{name: name, contentType: ct, load: load}
}

// prepare reads the file and makes its ETag and gzipped copy, once.
func (a *asset) prepare() error {
	a.once.Do(func() {
		b, err := a.load()
		if err != nil {
			a.err = err
			return
		}
		a.body = b
		sum := sha256.Sum256(b)
		a.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // the level is valid
		zw.Write(b)
		zw.Close()
		if buf.Len() < len(b) {
			a.gz = buf.Bytes()
		}
	})
	return a.err
}

// Version is the content hash of the embedded files, which asset URLs
// carry as ?v=.
func (h *Handler) Version() string { return h.version }

// Page serves the dashboard page (at /, /svc/dashboard and the like).
func (h *Handler) Page() http.Handler { return servePage(h.page) }

// OperatorPage serves the operator's page (at OperatorPrefix on the admin
// listener), under the same policy as Page.
func (h *Handler) OperatorPage() http.Handler { return servePage(h.operator) }

func servePage(page *asset) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
		page.serve(w, r)
	})
}

// Assets serves the page's files at AssetPrefix + name, with name taken
// from the request's {name...} path value; anything else goes to
// notFound.
func (h *Handler) Assets(notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := h.assets[r.PathValue("name")]
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		if r.URL.Query().Get("v") == h.version {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		a.serve(w, r)
	})
}

// serve writes the asset, gzipped when the client takes it, answering
// conditional requests (If-None-Match) with 304.
func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	if err := a.prepare(); err != nil {
		// The package's tests rule this out for a built binary.
		http.Error(w, "dashboard file unavailable", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	body, etag := a.body, a.etag
	if a.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
			hd.Set("Content-Encoding", "gzip")
		}
	}
	hd.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		// gzip;q=0 refuses it; any other weight takes it.
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		w, err := strconv.ParseFloat(q, 64)
		return err == nil && w > 0
	}
	return false
}
