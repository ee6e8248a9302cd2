package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/matryer/is"
)

// run runs the CLI with args against db and returns exit code, stdout, stderr.
func run(t *testing.T, db string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), append([]string{"--db", db}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// newDB returns the path of a new, empty database (svcgw init).
func newDB(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "svcgw.db")
	if code, _, stderr := run(t, db, "init"); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	return db
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serve runs `svcgw serve` in the background until the test ends, and
// waits for /healthz.
func serve(t *testing.T, db string, args ...string) (addr string, stderr *syncBuffer) {
	t.Helper()
	addr = freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- Run(ctx, append([]string{"--db", db, "serve", "--addr", addr}, args...), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	for i := 0; i < 200; i++ {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return addr, stderr
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("serve did not come up: %s", stderr.String())
	return "", nil
}

func getCredits(t *testing.T, addr, key string) (int, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/svc/v1/credits", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestCLI_KeysCreateCapturedAndUsedOverHTTP(t *testing.T) {
	is := is.New(t)
	db := newDB(t)

	code, key, stderr := run(t, db, "keys", "create", "--account", "acme", "--name", "ci")
	is.Equal(code, 0)                            // keys create
	key = strings.TrimSpace(key)                 // as $(…) would
	is.True(strings.HasPrefix(key, "llm_live_")) // stdout is only the key
	is.True(!strings.Contains(key, "\n"))        // one line
	is.True(strings.Contains(stderr, "acme"))    // details on stderr
	code, _, stderr = run(t, db, "credits", "add", "--account", "acme", "12.5")
	is.Equal(code, 0) // credits add
	_ = stderr

	addr, _ := serve(t, db)
	status, body := getCredits(t, addr, key)
	is.Equal(status, http.StatusOK)          // captured key works over HTTP
	is.Equal(body["balance"], "12.500000")   // credits added by the CLI
	is.Equal(body["total_used"], "0.000000") // nothing spent

	// An existing database is not bootstrapped again.
	code, out, _ := run(t, db, "keys", "list", "--json")
	is.Equal(code, 0) // keys list
	var keys []map[string]any
	is.NoErr(json.Unmarshal([]byte(out), &keys)) // keys list --json
	is.Equal(len(keys), 1)                       // only the created key
	is.True(!strings.Contains(out, key))         // never a secret
}

func TestCLI_ServeBootstrapsEmptyDatabase(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	addr, stderr := serve(t, db, "--bootstrap-credits", "3")
	var key string
	for _, f := range strings.Fields(stderr.String()) {
		if strings.HasPrefix(f, "llm_live_") {
			key = f
			break
		}
	}
	is.True(key != "") // bootstrap key printed on stderr
	status, body := getCredits(t, addr, key)
	is.Equal(status, http.StatusOK)       // bootstrap key works
	is.Equal(body["balance"], "3.000000") // starter balance
	code, out, _ := run(t, db, "credits", "show", "--account", "default", "--json")
	is.Equal(code, 0) // credits show
	is.True(strings.Contains(out, `"balance": "3.000000"`))
}

func TestCLI_Revoke(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	_, key, _ := run(t, db, "keys", "create", "--account", "acme")
	key = strings.TrimSpace(key)
	_, out, _ := run(t, db, "keys", "list", "--account", "acme", "--json")
	var keys []struct {
		ID string `json:"id"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &keys))
	is.Equal(len(keys), 1)
	code, _, revoked := run(t, db, "keys", "revoke", keys[0].ID)
	is.Equal(code, 0) // revoke
	is.True(strings.HasPrefix(revoked, "revoked key "+keys[0].ID))
	time.Sleep(2 * time.Millisecond) // past the ledger's millisecond
	code, _, again := run(t, db, "keys", "revoke", keys[0].ID)
	is.Equal(code, 0)                                           // revoking twice is no error
	is.True(strings.Contains(again, "was already revoked, at")) // but says so
	is.True(!strings.HasPrefix(again, "revoked"))
	addr, _ := serve(t, db)
	status, _ := getCredits(t, addr, key)
	is.Equal(status, http.StatusUnauthorized) // revoked key refused

	code, _, stderr := run(t, db, "keys", "revoke", "key_doesnotexist")
	is.Equal(code, 1)                              // unknown key id
	is.True(strings.Contains(stderr, "not found")) // clear message
}

func TestCLI_CreditsAddRejectsBadAmounts(t *testing.T) {
	db := newDB(t)
	run(t, db, "keys", "create", "--account", "acme")
	for _, amt := range []string{"0", "-5", "abc", "1e3", "0.0000001", "NaN"} {
		t.Run(amt, func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := run(t, db, "credits", "add", "--account", "acme", "--", amt)
			is.True(code != 0)    // rejected
			is.True(stderr != "") // with a message
		})
	}
	is := is.New(t)
	code, _, stderr := run(t, db, "credits", "add", "--account", "nobody", "5")
	is.True(code != 0)                          // unknown account
	is.True(strings.Contains(stderr, "nobody")) // names it
}

// An amount that would overflow the account's credits is refused with a
// clear message, not SQLite's, and changes nothing.
func TestCLI_CreditsAddRefusesAnOverflowingTotal(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	run(t, db, "init")
	run(t, db, "keys", "create", "--account", "acme")
	for range 9 {
		code, _, stderr := run(t, db, "credits", "add", "--account", "acme", "999999999999")
		is.Equal(code, 0) // within the maximum: nine times just under a trillion
		_ = stderr
	}
	code, _, stderr := run(t, db, "credits", "add", "--account", "acme", "999999999999")
	is.True(code != 0) // the tenth would pass it
	is.True(strings.Contains(stderr, "past the maximum of 9000000000000.000000 USD"))
	is.True(!strings.Contains(strings.ToLower(stderr), "sqlite"))
	is.True(!strings.Contains(stderr, "REAL"))
	code, out, _ := run(t, db, "credits", "show", "--account", "acme", "--json")
	is.Equal(code, 0)
	is.True(strings.Contains(out, `"balance": "8999999999991.000000"`)) // nothing was added
}

func TestCLI_EnvFallback(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "env.db")
	t.Setenv("SVCGW_DB", db)
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"init"}, &out, &errb)
	is.Equal(code, 0) // init with --db from SVCGW_DB
	code = Run(context.Background(), []string{"keys", "create", "--account", "envacct"}, &out, &errb)
	is.Equal(code, 0) // keys create with --db from SVCGW_DB
	code = Run(context.Background(), []string{"keys", "list", "--account", "envacct"}, &out, &errb)
	is.Equal(code, 0) // the same database was used
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestCLI_UsageAndGenerationMatchTheHTTPEndpoints(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	_, key, _ := run(t, db, "keys", "create", "--account", "acme", "--name", "ci")
	key = strings.TrimSpace(key)
	run(t, db, "credits", "add", "--account", "acme", "5")
	addr, _ := serve(t, db)

	post := func(body string) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Title", "cli-test")
		resp, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		defer resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusOK)
		var out map[string]any
		is.NoErr(json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	first := post(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
	post(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	get := func(path string) []byte {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}

	for _, groupBy := range []string{"day", "request_type", "application", "api_key"} {
		httpBody := get("/svc/v1/usage?group_by=" + groupBy)
		code, out, stderr := run(t, db, "usage", "--account", "acme", "--group-by", groupBy, "--json")
		is.Equal(code, 0) // usage --json
		var fromHTTP, fromCLI any
		is.NoErr(json.Unmarshal(httpBody, &fromHTTP))
		is.NoErr(json.Unmarshal([]byte(out), &fromCLI))
		is.Equal(fromCLI, fromHTTP) // the same report
		_ = stderr
	}
	code, table, _ := run(t, db, "usage", "--account", "acme", "--group-by", "request_type")
	is.Equal(code, 0)
	is.True(strings.Contains(table, "REQUEST TYPE")) // a human table
	is.True(strings.Contains(table, "code"))
	is.True(strings.Contains(table, "total"))

	id := first["id"].(string)
	var fromHTTP struct {
		Data map[string]any `json:"data"`
	}
	is.NoErr(json.Unmarshal(get("/svc/v1/generation?id="+id), &fromHTTP))
	code, out, _ := run(t, db, "generation", id, "--json")
	is.Equal(code, 0) // generation --json
	var fromCLI map[string]any
	is.NoErr(json.Unmarshal([]byte(out), &fromCLI))
	is.Equal(fromCLI, fromHTTP.Data) // the same record
	is.Equal(fromCLI["application"], "cli-test")

	code, _, stderr := run(t, db, "usage", "--account", "acme", "--group-by", "model")
	is.True(code != 0)                              // unknown grouping
	is.True(strings.Contains(stderr, "--group-by")) // says which flag
	code, _, _ = run(t, db, "generation", "chatcmpl-nope")
	is.True(code != 0) // unknown id
}

func TestCLI_VersionFlagReadsNoEnvironment(t *testing.T) {
	// A container may set SVCGW_VERSION for its own reasons; it must not
	// turn every command into --version.
	is := is.New(t)
	t.Setenv("SVCGW_VERSION", "1.2.3")
	db := filepath.Join(t.TempDir(), "svcgw.db")
	addr, _ := serve(t, db) // serve served
	resp, err := http.Get("http://" + addr + "/healthz")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
	code, out, _ := run(t, db, "keys", "list")
	is.Equal(code, 0)
	is.True(strings.HasPrefix(out, "ID")) // keys list ran, not --version
}

func TestCLI_ServeSettingsInTheEnvironmentDoNotChangeOtherCommands(t *testing.T) {
	// Only settings that mean the same everywhere (SVCGW_DB, SVCGW_CONFIG,
	// the log settings) come from the environment for every command; a
	// shell prepared for serve must not pin a new key's limits, cap an
	// account or pick another account.
	is := is.New(t)
	db := newDB(t)
	for k, v := range map[string]string{
		"SVCGW_RPM": "600", "SVCGW_TPM": "90000", "SVCGW_SERVE_RPM": "600", "SVCGW_SERVE_TPM": "90000",
		"SVCGW_DAILY": "1", "SVCGW_MONTHLY": "2", "SVCGW_DAILY_LIMIT": "1", "SVCGW_MONTHLY_LIMIT": "2",
		"SVCGW_NAME": "from-env", "SVCGW_ACCOUNT": "from-env", "SVCGW_JSON": "true",
	} {
		t.Setenv(k, v)
	}
	code, _, _ := run(t, db, "keys", "create", "--account", "acme")
	is.Equal(code, 0) // keys create

	code, out, _ := run(t, db, "keys", "list", "--json")
	is.Equal(code, 0) // keys list: SVCGW_ACCOUNT does not filter it
	var keys []struct {
		Account    string  `json:"account"`
		Name       string  `json:"name"`
		DailyCap   *string `json:"daily_cap"`
		MonthlyCap *string `json:"monthly_cap"`
		RPM, TPM   *int64
	}
	is.NoErr(json.Unmarshal([]byte(out), &keys))
	is.Equal(len(keys), 1)
	k := keys[0]
	is.Equal(k.Account, "acme")
	is.Equal(k.Name, "default")                       // not SVCGW_NAME
	is.True(k.RPM == nil && k.TPM == nil)             // the server's defaults, not SVCGW_RPM
	is.True(k.DailyCap == nil && k.MonthlyCap == nil) // no caps

	code, out, _ = run(t, db, "keys", "list")
	is.Equal(code, 0)
	is.True(strings.HasPrefix(out, "ID")) // a table: SVCGW_JSON is not --json

	code, _, _ = run(t, db, "credits", "cap", "--account", "acme", "--daily", "5")
	is.Equal(code, 0) // credits cap
	code, out, _ = run(t, db, "credits", "show", "--account", "acme", "--json")
	is.Equal(code, 0)
	var acct struct {
		DailyCap   *string `json:"daily_cap"`
		MonthlyCap *string `json:"monthly_cap"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &acct))
	is.Equal(*acct.DailyCap, "5.000000") // the flag given
	is.Equal(acct.MonthlyCap, nil)       // not SVCGW_MONTHLY
}

func TestCLI_EnvironmentVariablesFollowTheRule(t *testing.T) {
	// Every flag's environment variable is either a global one, or, on
	// serve, SVCGW_SERVE_<FLAG>; other commands read flags only, but for
	// a credential, which the environment keeps out of process listings
	// (SVCGW_ADMIN_TOKEN, an admin token for --admin-addr).
	global := map[string]bool{"SVCGW_DB": true, "SVCGW_DB_FILE": true, "SVCGW_CONFIG": true, "SVCGW_LOG_LEVEL": true, "SVCGW_LOG_FORMAT": true,
		"SVCGW_ADMIN_TOKEN": true}
	parser, err := newParser(&root{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var visit func(n *kong.Node)
	visit = func(n *kong.Node) {
		for _, f := range n.Flags {
			if f.Name == "help" {
				continue
			}
			for _, env := range f.Envs {
				if global[env] {
					continue
				}
				if want := "SVCGW_SERVE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")); n.Name == "serve" && env == want {
					continue
				}
				t.Errorf("%s --%s reads %s: only %v, and SVCGW_SERVE_<FLAG> on serve, may be read", n.Path(), f.Name, env, global)
			}
			if n.Name == "serve" && len(f.Envs) == 0 {
				t.Errorf("serve --%s has no environment variable (want SVCGW_SERVE_<FLAG>)", f.Name)
			}
		}
		for _, a := range n.Positional {
			for _, env := range a.Tag.Envs {
				if !global[env] {
					t.Errorf("%s %s reads %s", n.Path(), a.Name, env)
				}
			}
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(parser.Model.Node)
}

func TestCLI_OnlyServeAndInitCreateADatabase(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "svcgw.db")
	for _, args := range [][]string{
		{"keys", "list"},
		{"keys", "create", "--account", "acme"},
		{"keys", "limit", "key_0123456789abcdef", "--rpm", "5"},
		{"keys", "revoke", "key_0123456789abcdef"},
		{"credits", "add", "--account", "acme", "5"},
		{"credits", "show", "--account", "acme"},
		{"credits", "cap", "--account", "acme", "--daily", "5"},
		{"usage", "--account", "acme"},
		{"generation", "chatcmpl-x"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			is := is.New(t)
			code, out, stderr := run(t, db, args...)
			is.Equal(code, 1)                             // refused
			is.Equal(out, "")                             // nothing on stdout
			is.True(strings.Contains(stderr, db))         // names the path it looked for
			is.True(strings.Contains(stderr, "--db"))     // and how to point at another
			is.True(strings.Contains(stderr, "SVCGW_DB")) // or set it
			_, err := os.Stat(db)
			is.True(errors.Is(err, fs.ErrNotExist)) // left nothing behind
		})
	}

	is := is.New(t)
	// serve on a taken address fails before creating anything.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer ln.Close()
	code, _, stderr := run(t, db, "serve", "--addr", ln.Addr().String())
	is.Equal(code, 1)                                     // bind failed
	is.True(strings.Contains(stderr, ln.Addr().String())) // names the address
	_, err = os.Stat(db)
	is.True(errors.Is(err, fs.ErrNotExist)) // no database left behind
	// Nor does serve with a bad configuration.
	bad := filepath.Join(dir, "bad.yaml")
	is.NoErr(os.WriteFile(bad, []byte("upstreams: {}\n"), 0o600))
	code, _, _ = run(t, db, "serve", "--addr", "127.0.0.1:0", "--config", bad)
	is.Equal(code, 1) // bad config
	_, err = os.Stat(db)
	is.True(errors.Is(err, fs.ErrNotExist)) // no database left behind

	// init creates it, once; then the commands work.
	code, _, stderr = run(t, db, "init")
	is.Equal(code, 0) // init
	is.True(strings.Contains(stderr, "created"))
	code, _, stderr = run(t, db, "init")
	is.Equal(code, 0) // init again is harmless
	is.True(strings.Contains(stderr, "already"))
	code, out, _ := run(t, db, "keys", "list")
	is.Equal(code, 0) // keys list
	is.True(strings.HasPrefix(out, "ID"))
}

func TestCLI_ErrorsSayItOnceInTheCommandLinesTerms(t *testing.T) {
	db := newDB(t)
	for _, tc := range []struct {
		args []string
		once string   // named exactly once
		want []string // and these said
	}{
		{[]string{"credits", "show", "--account", "nobody"}, `"nobody"`, []string{"not found", db}},
		{[]string{"credits", "add", "--account", "nobody", "5"}, `"nobody"`, []string{"not found"}},
		{[]string{"keys", "list", "--account", "nobody"}, `"nobody"`, []string{"not found"}},
		{[]string{"usage", "--account", "nobody"}, `"nobody"`, []string{"not found"}},
		{[]string{"keys", "limit", "key_0123456789abcdef", "--rpm", "5"}, "key_0123456789abcdef", []string{"not found", "keys list"}},
		{[]string{"keys", "revoke", "key_0123456789abcdef"}, "key_0123456789abcdef", []string{"not found", "keys list"}},
		{[]string{"usage", "--account", "a", "--start", "2025-13-01"}, "--start", []string{`"2025-13-01"`, "YYYY-MM-DD"}},
		{[]string{"usage", "--account", "a", "--end", "soon"}, "--end", []string{`"soon"`}},
		{[]string{"usage", "--account", "a", "--start", "2025-02-01", "--end", "2025-01-01"}, "--end", []string{"--start"}},
		{[]string{"usage", "--account", "a", "--group-by", "model"}, "--group-by", []string{"request_type"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := run(t, db, tc.args...)
			is.True(code != 0)                          // refused
			is.Equal(strings.Count(stderr, tc.once), 1) // said once
			for _, w := range tc.want {
				is.True(strings.Contains(stderr, w)) // says what is wrong
			}
			for _, api := range []string{"start_date", "end_date", "group_by", "invalid_request"} {
				is.True(!strings.Contains(stderr, api)) // no API parameter names or error kinds
			}
		})
	}
}

func TestServe_ShutdownLogsTheLedgerFlush(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int)
	go func() { done <- Run(ctx, []string{"--db", db, "serve", "--addr", addr}, io.Discard, stderr) }()
	up := false
	for i := 0; i < 200 && !up; i++ {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			up = true
		} else {
			time.Sleep(25 * time.Millisecond)
		}
	}
	is.True(up) // serve came up
	cancel()    // as SIGTERM does
	is.Equal(<-done, 0)
	logs := stderr.String()
	is.True(strings.Contains(logs, "ledger flushed")) // says nothing was lost
	is.True(strings.Contains(logs, db))               // and where it went
}

// svcgw alone prints its usage, as --help does, and succeeds; every serve
// flag's help shows its default.
func TestRun_AloneIsTheUsage(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	for _, args := range [][]string{nil, {"--db", db}, {"--db=" + db}} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, &out, &errb)
		is.Equal(code, 0)                                                  // not a usage error
		is.True(strings.HasPrefix(out.String(), "Usage: svcgw <command>")) // the usage
		is.True(strings.Contains(out.String(), "serve"))                   // with the commands
		is.Equal(errb.String(), "")
	}
	code, out, _ := run(t, db, "serve", "--help")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "--gc-floor=32")) // the default, not a placeholder
	code, _, stderr := run(t, db, "--bogus")
	is.Equal(code, 2) // a real usage error is still one
	is.True(strings.Contains(stderr, "--bogus"))
}

// The README's command-line block lists every command the grammar has.
func TestREADME_CommandLineListsEveryCommand(t *testing.T) {
	is := is.New(t)
	readme, err := os.ReadFile("../README.md")
	is.NoErr(err)
	_, block, _ := strings.Cut(string(readme), "## Command line\n\n```text\n")
	block, _, _ = strings.Cut(block, "```")
	var cli root
	parser, err := newParser(&cli, io.Discard, io.Discard)
	is.NoErr(err)
	for _, n := range parser.Model.Leaves(true) {
		if n.Type != kong.CommandNode {
			continue
		}
		// "keys create" is listed as "svcgw keys create|list|…", and
		// "admin tokens list" as "svcgw admin tokens create|list|…".
		path := strings.Fields(n.Path())
		group, leaf := strings.Join(path[:len(path)-1], " "), path[len(path)-1]
		listed := regexp.MustCompile(`(?m)^svcgw ` + regexp.QuoteMeta(group) + ` ?(\S*\|)?` + leaf + `\b`)
		is.True(listed.MatchString(block)) // listed
	}
}

// The command line never prints the API's error codes: a bad amount is
// said in words, whatever command parses it.
func TestRun_ErrorsWithoutAPICodes(t *testing.T) {
	db := newDB(t)
	for _, args := range [][]string{
		{"credits", "add", "--account", "acme", "5usd"},
		{"credits", "cap", "--account", "default", "--daily", "abc"},
		{"keys", "create", "--account", "acme", "--daily-limit=-1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := run(t, db, args...)
			is.Equal(code, 1)
			is.True(strings.HasPrefix(stderr, "svcgw: "))
			is.True(strings.Contains(stderr, "amount"))           // says what is wrong
			is.True(!strings.Contains(stderr, "invalid_request")) // in words, not the API's code
		})
	}
}

// Keys created without --name are told apart: default, default-2, …
func TestCLI_UnnamedKeysAreDistinguishable(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	for range 3 {
		code, _, _ := run(t, db, "keys", "create", "--account", "acme")
		is.Equal(code, 0) // create
	}
	code, _, _ := run(t, db, "keys", "create", "--account", "acme", "--name", "ci")
	is.Equal(code, 0)
	code, _, stderr := run(t, db, "keys", "create", "--account", "acme")
	is.Equal(code, 0)
	is.True(strings.Contains(stderr, "(default-4)")) // the next free number
	_, out, _ := run(t, db, "keys", "list", "--account", "acme", "--json")
	var keys []struct {
		Name string `json:"name"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &keys))
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	sort.Strings(names)
	is.Equal(names, []string{"ci", "default", "default-2", "default-3", "default-4"})
	// Another account starts at default again.
	_, _, stderr = run(t, db, "keys", "create", "--account", "beta")
	is.True(strings.Contains(stderr, "(default)"))
}

// A PostgreSQL server that does not answer is reported as that, naming
// the (redacted) URL once, for a command that opens the database and for
// one that creates it: not as a migration's failure.
func TestCLI_PostgresThatDoesNotAnswer(t *testing.T) {
	url := "postgres://svcgw:secret@" + freeAddr(t) + "/svcgw?connect_timeout=5"
	for _, args := range [][]string{{"keys", "list"}, {"init"}} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := run(t, url, args...)
			is.Equal(code, 1)
			is.True(strings.HasPrefix(stderr, "svcgw: connect to postgres postgres://svcgw:xxxxx@")) // what failed
			is.Equal(strings.Count(stderr, "postgres://"), 1)                                        // the URL once
			is.True(!strings.Contains(stderr, "secret"))                                             // redacted
			is.True(!strings.Contains(stderr, "migration"))                                          // not blamed on a migration
		})
	}
}

// A path in a directory that does not exist is said to be that, by every
// command, and nothing is created.
func TestCLI_MissingDirectoryIsSaidToBeMissing(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "missing", "dir")
	db := newDB(t)
	for _, tc := range []struct {
		name, db string
		args     []string
		dir      string
	}{
		{"serve", filepath.Join(missing, "svcgw.db"), []string{"serve", "--addr", "127.0.0.1:0"}, missing},
		{"init", filepath.Join(missing, "svcgw.db"), []string{"init"}, missing},
		{"keys list", filepath.Join(missing, "svcgw.db"), []string{"keys", "list"}, missing},
		{"backup", db, []string{"backup", filepath.Join(root, "backups", "svcgw.db")}, filepath.Join(root, "backups")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := run(t, tc.db, tc.args...)
			is.Equal(code, 1)
			is.True(strings.Contains(stderr, "the directory "+tc.dir+" does not exist")) // says what is wrong
			is.True(!strings.Contains(stderr, "stop it first"))                          // blames no other server
			is.True(!strings.Contains(stderr, "(14)"))                                   // nor SQLite's code
			_, err := os.Stat(tc.dir)
			is.True(errors.Is(err, fs.ErrNotExist)) // nothing created
		})
	}
}
