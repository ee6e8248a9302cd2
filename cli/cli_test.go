package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// run runs the CLI with args against db and returns exit code, stdout, stderr.
func run(t *testing.T, db string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), append([]string{"--db", db}, args...), &out, &errb)
	return code, out.String(), errb.String()
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
	db := filepath.Join(t.TempDir(), "svcgw.db")

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
	db := filepath.Join(t.TempDir(), "svcgw.db")
	_, key, _ := run(t, db, "keys", "create", "--account", "acme")
	key = strings.TrimSpace(key)
	_, out, _ := run(t, db, "keys", "list", "--account", "acme", "--json")
	var keys []struct {
		ID string `json:"id"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &keys))
	is.Equal(len(keys), 1)
	code, _, _ := run(t, db, "keys", "revoke", keys[0].ID)
	is.Equal(code, 0) // revoke
	addr, _ := serve(t, db)
	status, _ := getCredits(t, addr, key)
	is.Equal(status, http.StatusUnauthorized) // revoked key refused

	code, _, stderr := run(t, db, "keys", "revoke", "key_doesnotexist")
	is.Equal(code, 1)                              // unknown key id
	is.True(strings.Contains(stderr, "not found")) // clear message
}

func TestCLI_CreditsAddRejectsBadAmounts(t *testing.T) {
	db := filepath.Join(t.TempDir(), "svcgw.db")
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
	code := Run(context.Background(), []string{"keys", "create", "--account", "envacct"}, &out, &errb)
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
	db := filepath.Join(t.TempDir(), "svcgw.db")
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
	is.True(code != 0)                            // unknown grouping
	is.True(strings.Contains(stderr, "group_by")) // says which
	code, _, _ = run(t, db, "generation", "chatcmpl-nope")
	is.True(code != 0) // unknown id
}
