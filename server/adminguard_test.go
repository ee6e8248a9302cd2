package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
)

// TestAdminGuard_RefusesBrowsersOfOtherOriginsAndForeignHosts sends each
// request over HTTP to a guarded handler and checks whether it reached
// the handler: a refusal is a 403 with the JSON error, and the handler
// never runs.
func TestAdminGuard_RefusesBrowsersOfOtherOriginsAndForeignHosts(t *testing.T) {
	is := is.New(t)
	var reached atomic.Int64
	guard, err := NewAdminGuard(slog.New(slog.DiscardHandler), "admin.example.internal:9090", []string{"svcgw.monitoring.svc", "*.corp.example", "Trailing.Dot.example."})
	is.NoErr(err) // guard
	srv := httptest.NewServer(guard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	self := srv.Listener.Addr().String() // 127.0.0.1:port
	hostname, _ := os.Hostname()

	type hdr = map[string]string
	for _, tc := range []struct {
		name    string
		method  string
		host    string // "" = the listener's own address
		headers hdr
		code    string // "" = reaches the handler
	}{
		{name: "curl or Prometheus: no browser headers", method: "GET"},
		{name: "svcgw config reload: a POST without browser headers", method: "POST"},
		{name: "same-origin fetch", method: "POST", headers: hdr{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Origin": "http://" + self}},
		{name: "typed in the address bar", method: "GET", headers: hdr{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}},
		{name: "a link followed from another site", method: "GET", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}},
		{name: "a frame on another site", method: "GET", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, code: "forbidden_origin"},
		{name: "cross-site POST form", method: "POST", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Origin": "https://evil.example"}, code: "forbidden_origin"},
		{name: "cross-site fetch POST", method: "POST", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Origin": "https://evil.example"}, code: "forbidden_origin"},
		{name: "same-site fetch from another port", method: "POST", headers: hdr{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Origin": "http://127.0.0.1:1"}, code: "forbidden_origin"},
		{name: "cross-site fetch GET of the metrics", method: "GET", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, code: "forbidden_origin"},
		{name: "cross-site image of a profile", method: "GET", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, code: "forbidden_origin"},
		{name: "cross-site HEAD", method: "HEAD", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, code: "forbidden_origin"},
		{name: "cross-site preflight", method: "OPTIONS", headers: hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, code: "forbidden_origin"},
		{name: "old browser: Origin of another host", method: "POST", headers: hdr{"Origin": "https://evil.example"}, code: "forbidden_origin"},
		{name: "old browser: Origin of another port", method: "GET", headers: hdr{"Origin": "http://127.0.0.1:1"}, code: "forbidden_origin"},
		{name: "old browser: null Origin", method: "POST", headers: hdr{"Origin": "null"}, code: "forbidden_origin"},
		{name: "old browser: own Origin", method: "POST", headers: hdr{"Origin": "http://" + self}},

		{name: "DNS rebinding: an attacker's name", method: "GET", host: "rebind.evil.example:9090", code: "forbidden_host"},
		{name: "DNS rebinding, same-origin to the page", method: "POST", host: "rebind.evil.example", headers: hdr{"Sec-Fetch-Site": "same-origin", "Origin": "http://rebind.evil.example"}, code: "forbidden_host"},
		{name: "a name that only ends like an allowed one", method: "GET", host: "evilcorp.example", code: "forbidden_host"},
		{name: "the apex of a wildcard", method: "GET", host: "corp.example", code: "forbidden_host"},
		{name: "localhost", method: "GET", host: "localhost:9090"},
		{name: "LOCALHOST with a trailing dot", method: "GET", host: "LOCALHOST.:9090"},
		{name: "an IPv4 address", method: "GET", host: "10.1.2.3:9090"},
		{name: "an IPv6 address", method: "GET", host: "[fd00::1]:9090"},
		{name: "the admin address's own name", method: "GET", host: "admin.example.internal:9090"},
		{name: "an allowed name", method: "GET", host: "svcgw.monitoring.svc:9090"},
		{name: "an allowed name in capitals", method: "GET", host: "SVCGW.Monitoring.svc"},
		{name: "a name under an allowed wildcard", method: "GET", host: "prom.eu.corp.example:9090"},
		{name: "an allowed name given with a trailing dot", method: "GET", host: "trailing.dot.example"},
		{name: "this machine's host name", method: "GET", host: hostname},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			req, err := http.NewRequest(tc.method, srv.URL+"/-/reload", nil)
			is.NoErr(err)
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			before := reached.Load()
			resp, err := http.DefaultClient.Do(req)
			is.NoErr(err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.code == "" {
				is.Equal(resp.StatusCode, http.StatusNoContent) // reached the handler
				is.Equal(reached.Load(), before+1)
				return
			}
			is.Equal(resp.StatusCode, http.StatusForbidden) // refused
			is.Equal(reached.Load(), before)                // before the handler
			if tc.method == "HEAD" {
				return
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			is.NoErr(json.Unmarshal(body, &e)) // a JSON error
			is.Equal(e.Error.Code, tc.code)
			is.True(e.Error.Message != "")
		})
	}
}

func TestAdminGuard_AnyHostAndBadEntries(t *testing.T) {
	is := is.New(t)
	log := slog.New(slog.DiscardHandler)
	for _, bad := range []string{"http://svcgw.internal", "svcgw.internal:9090", "svcgw.internal/metrics", "*.", "a..b", "10.0.0.1", "*evil"} {
		_, err := NewAdminGuard(log, "127.0.0.1:0", []string{bad})
		is.True(err != nil) // refused entry
		is.True(strings.Contains(err.Error(), "--admin-allowed-hosts"))
	}
	guard, err := NewAdminGuard(log, "127.0.0.1:0", []string{"*"})
	is.NoErr(err)
	srv := httptest.NewServer(guard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Host = "anything.example"
	resp, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK) // "*" lets any Host through
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "cors")
	resp, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusForbidden) // but not other origins
}

func TestRedactArg(t *testing.T) {
	is := is.New(t)
	for in, want := range map[string]string{
		"postgres://svcgw:s3cret@db.internal:5432/svcgw":          "postgres://svcgw:xxxxx@db.internal:5432/svcgw",
		"--db=postgresql://svcgw:s3cret@db/svcgw?sslmode=require": "--db=postgresql://svcgw:xxxxx@db/svcgw?sslmode=require",
		"postgres://svcgw@db/svcgw?password=s3cret":               "postgres://svcgw@db/svcgw?password=xxxxx",
		"--admin-addr=127.0.0.1:9090":                             "--admin-addr=127.0.0.1:9090",
		"https://user:s3cret@proxy.example/":                      "https://user:xxxxx@proxy.example/",
		"https://proxy.example/?q=1":                              "https://proxy.example/?q=1",
		"http://user:s3cret@[::1/":                                "(unparsable URL)",
		"svcgw.db":                                                "svcgw.db",
		"--db-file=/run/secrets/db":                               "--db-file=/run/secrets/db",
		"--config=/etc/svcgw/a=b.yaml":                            "--config=/etc/svcgw/a=b.yaml",
	} {
		got := redactArg(in)
		is.Equal(got, want) // redactArg(in)
		if _, err := url.Parse(in); err == nil {
			is.True(!strings.Contains(got, "s3cret")) // no password left
		}
	}
}
