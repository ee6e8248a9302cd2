package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestServe_AdminListenerRefusesOtherOriginsAndForeignHosts drives a real
// serve's admin listener as a web page on another origin, and one reached
// by DNS rebinding, would: each gets 403 before any handler runs (the
// reload handler's own answer without --config is a 422, so a 403 is
// the guard's), while Prometheus, curl, svcgw config reload and an
// operator's browser on the listener's address are answered.
func TestServe_AdminListenerRefusesOtherOriginsAndForeignHosts(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	token := newAdminToken(t, db, false)
	admin := freeAddr(t)
	_, logs := serve(t, db, "--admin-addr", admin, "--admin-allowed-hosts", "svcgw.monitoring.svc, *.corp.example")
	client := &http.Client{Timeout: 30 * time.Second}

	do := func(method, path, host string, headers map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+admin+path, nil)
		is.NoErr(err)
		if host != "" {
			req.Host = host
		}
		// Every request carries the admin token, a refused one too: the
		// guard refuses before any credential counts.
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		is.NoErr(err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	crossSite := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Origin": "https://evil.example"}
	rebound := "rebind.evil.example:" + strings.Split(admin, ":")[1]

	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=1"} {
		st, _ := do("GET", path, "", nil)
		is.Equal(st, http.StatusOK) // a scraper or curl
		st, body := do("GET", path, "", crossSite)
		is.Equal(st, http.StatusForbidden) // a page on another origin
		is.True(strings.Contains(body, `"forbidden_origin"`))
		st, body = do("GET", path, rebound, nil)
		is.Equal(st, http.StatusForbidden) // a page on a rebound name
		is.True(strings.Contains(body, `"forbidden_host"`))
		is.True(strings.Contains(body, "--admin-allowed-hosts")) // says what to do
		st, _ = do("GET", path, "svcgw.monitoring.svc:9090", nil)
		is.Equal(st, http.StatusOK) // an allowed name
		st, _ = do("GET", path, "prometheus.eu.corp.example", nil)
		is.Equal(st, http.StatusOK) // under an allowed wildcard
		st, _ = do("GET", path, "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
		is.Equal(st, http.StatusOK) // a link from another site, opened in a tab
	}
	// A CPU profile started from another origin would cost a core for its
	// length: refused at once.
	start := time.Now()
	st, _ := do("GET", "/debug/pprof/profile?seconds=5", "", crossSite)
	is.Equal(st, http.StatusForbidden)
	is.True(time.Since(start) < 5*time.Second) // no profile was taken

	st, body := do("POST", "/-/reload", "", crossSite)
	is.Equal(st, http.StatusForbidden) // a cross-site form or fetch
	is.True(strings.Contains(body, `"forbidden_origin"`))
	st, _ = do("POST", "/-/reload", "", map[string]string{"Origin": "http://127.0.0.1:1"})
	is.Equal(st, http.StatusForbidden) // an old browser's request from another port
	st, _ = do("POST", "/-/reload", rebound, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + rebound})
	is.Equal(st, http.StatusForbidden) // rebinding: same-origin to the page, but not this listener's name
	st, _ = do("POST", "/-/reload", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + admin})
	is.Equal(st, http.StatusUnprocessableEntity) // the listener's own page reaches the handler
	st, _ = do("POST", "/-/reload", "", nil)
	is.Equal(st, http.StatusUnprocessableEntity) // and so does curl
	code, _, stderr := run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", token)
	is.Equal(code, 1)                                     // svcgw config reload reaches the handler
	is.True(strings.Contains(stderr, "without --config")) // (which has nothing to reload)
	code, _, stderr = run(t, db, "config", "reload", "--admin-addr", strings.Replace(admin, "127.0.0.1", "localhost", 1), "--admin-token", token)
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "without --config")) // localhost too

	// Each refusal is logged, with what was refused.
	is.True(strings.Contains(logs.String(), "admin listener refused a request"))
	is.True(strings.Contains(logs.String(), "rebind.evil.example"))
}

func TestServe_AdminAllowedHostsMistakesStopTheStart(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	for _, tc := range []struct{ args []string }{
		{[]string{"--admin-addr", freeAddr(t), "--admin-allowed-hosts", "http://svcgw.internal:9090"}},
		{[]string{"--admin-allowed-hosts", "svcgw.internal"}}, // no admin listener
	} {
		code, _, stderr := run(t, db, append([]string{"serve", "--addr", freeAddr(t)}, tc.args...)...)
		is.Equal(code, 1) // refused
		is.True(strings.Contains(stderr, "--admin-allowed-hosts"))
		_, err := os.Stat(db)
		is.True(os.IsNotExist(err)) // before any database was made
	}
}

// --db-file names the database by a file's contents, for every command.
func TestCLI_DBFile(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "svcgw.db")
	file := filepath.Join(dir, "db")
	is.NoErr(os.WriteFile(file, []byte(db+"\n"), 0o600))
	runFile := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := Run(context.Background(), append([]string{"--db-file", file}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, _, errOut := runFile("init")
	is.Equal(code, 0) // init
	is.True(strings.Contains(errOut, db))
	code, _, _ = runFile("keys", "create", "--account", "acme")
	is.Equal(code, 0) // keys create, in the same database
	code, out, _ := run(t, db, "keys", "list")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "acme")) // as --db names it

	t.Setenv("SVCGW_DB_FILE", file)
	code, out, _ = func() (int, string, string) {
		var o, e strings.Builder
		c := Run(context.Background(), []string{"keys", "list"}, &o, &e)
		return c, o.String(), e.String()
	}()
	is.Equal(code, 0) // SVCGW_DB_FILE
	is.True(strings.Contains(out, "acme"))

	is.NoErr(os.WriteFile(file, []byte("\n"), 0o600))
	code, _, errOut = runFile("keys", "list")
	is.Equal(code, 2) // an empty file
	is.True(strings.Contains(errOut, "want one line"))
}
