//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// keyUpstream is an OpenAI-compatible upstream that answers every chat
// completion with the same usage and remembers the API key of the last.
type keyUpstream struct {
	mu   sync.Mutex
	auth string
}

func (u *keyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.auth = r.Header.Get("Authorization")
	u.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1,"model":"m1",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
}

func (u *keyUpstream) lastAuth() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.auth
}

// reloadConfig is a configuration routing everything to the upstream at
// base with apiKey, at the given prices (USD per million tokens).
func reloadConfig(base, apiKey, input, output string) string {
	return fmt.Sprintf(`upstreams:
  up:
    protocol: openai
    base_url: %s/v1
    api_key: %s
    models:
      m1: {context_length: 8192, max_completion_tokens: 1024}
routes:
  default: [up/m1]
prices:
  default: {input: "%s", output: "%s"}
`, base, apiKey, input, output)
}

func TestServe_ReloadsItsConfiguration(t *testing.T) {
	is := is.New(t)
	up := &keyUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	db := newDB(t)
	code, key, _ := run(t, db, "keys", "create", "--account", "acme")
	is.Equal(code, 0) // keys create
	key = strings.TrimSpace(key)
	code, _, _ = run(t, db, "credits", "add", "--account", "acme", "100")
	is.Equal(code, 0) // credits add
	cfg := filepath.Join(t.TempDir(), "svcgw.yaml")
	write := func(doc string) {
		t.Helper()
		is.NoErr(os.WriteFile(cfg, []byte(doc), 0o600))
	}
	write(reloadConfig(upstream.URL, "key-one", "1000", "2000"))
	admin := freeAddr(t)
	srv := startServer(t, db, "--config", cfg, "--admin-addr", admin, "--admin-open-metrics")
	token := newAdminToken(t, db, false)

	client := &http.Client{Timeout: 10 * time.Second}
	// cost makes a call and returns what it was charged.
	cost := func() string {
		t.Helper()
		status, _, body, _ := call(t, client, srv.addr, key)
		is.Equal(status, http.StatusOK) // the call
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.addr+"/svc/v1/generation?id="+generationID(t, body), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		is.NoErr(err)
		defer resp.Body.Close()
		var g struct {
			Data struct {
				TotalCost string `json:"total_cost"`
			} `json:"data"`
		}
		is.NoErr(json.NewDecoder(resp.Body).Decode(&g))
		return g.Data.TotalCost
	}
	metric := func(series string) string {
		t.Helper()
		resp, err := client.Get("http://" + admin + "/metrics")
		is.NoErr(err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				return v
			}
		}
		return ""
	}
	waitMetric := func(series, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for metric(series) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s is %q, want %q; log: %s", series, metric(series), want, srv.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// 10 input tokens at $1000/M and 5 output at $2000/M.
	is.Equal(cost(), "0.020000")
	is.Equal(up.lastAuth(), "Bearer key-one")

	// New prices and a new upstream key; `svcgw config reload` signals
	// the serve holding the database's lock.
	write(reloadConfig(upstream.URL, "key-two", "2000", "4000"))
	code, out, stderr := run(t, db, "config", "reload")
	is.Equal(code, 0) // config reload
	is.True(strings.Contains(out, "sent SIGHUP"))
	waitMetric(`svcgw_config_reloads_total{result="ok"}`, "1")
	is.Equal(cost(), "0.040000")              // the next call pays the new prices
	is.Equal(up.lastAuth(), "Bearer key-two") // with the new credentials

	// A broken file is refused whole, naming its lines, and changes nothing.
	write(reloadConfig(upstream.URL, "key-three", "lots", "4000") + "unknown_section: 1\n")
	code, _, stderr = run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", token)
	is.Equal(code, 1)                                            // refused
	is.True(strings.Contains(stderr, cfg+":11:"))                // the bad price, at its line
	is.True(strings.Contains(stderr, cfg+":12:"))                // the unknown key, at its line
	is.True(strings.Contains(stderr, "keeps the configuration")) // and what that means
	is.Equal(metric("svcgw_config_last_reload_successful"), "0")
	is.Equal(cost(), "0.040000")              // the prices in force
	is.Equal(up.lastAuth(), "Bearer key-two") // the credentials in force
	// The serve's log names the lines too (it is flushed every 100 ms).
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(srv.stderr.String(), "configuration reload refused") || !strings.Contains(srv.stderr.String(), cfg+":11:") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal naming %s:11 in the log: %s", cfg, srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// SIGHUP itself, with the file still broken: refused again, and the
	// process goes on serving.
	is.NoErr(srv.cmd.Process.Signal(syscall.SIGHUP))
	waitMetric(`svcgw_config_reloads_total{result="error"}`, "2")
	is.Equal(cost(), "0.040000")

	// Fixed: it takes effect.
	write(reloadConfig(upstream.URL, "key-three", "1000", "2000"))
	code, out, _ = run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", token)
	is.Equal(code, 0)
	is.Equal(strings.TrimSpace(out), "reloaded")
	is.Equal(cost(), "0.020000")
	is.Equal(up.lastAuth(), "Bearer key-three")
}

func TestConfigReload_WithoutAServe(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	code, _, stderr := run(t, db, "config", "reload")
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "no svcgw serve is running on this database"))
	code, _, stderr = run(t, db, "config", "reload", "--admin-addr", freeAddr(t), "--admin-token", "svcgw_admin_x")
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "reload through"))
}

func TestServe_ReloadWithoutConfigIsRefused(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	admin := freeAddr(t)
	serve(t, db, "--admin-addr", admin)
	code, _, stderr := run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", newAdminToken(t, db, false))
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "without --config"))
	// Without --admin-addr too: no SIGHUP is sent, and it says why.
	code, out, stderr := run(t, db, "config", "reload")
	is.Equal(code, 1)                                       // refused
	is.True(!strings.Contains(out, "sent SIGHUP"))          // nothing signalled
	is.True(strings.Contains(stderr, "without --config"))   // and why
	is.True(strings.Contains(stderr, "nothing to re-read")) // what that means
}

func TestServe_AdminAddrMustDifferFromAddr(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	code, _, stderr := run(t, db, "serve", "--addr", "127.0.0.1:18080", "--admin-addr", "127.0.0.1:18080")
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "--admin-addr must differ from --addr"))
	_, err := os.Stat(db)
	is.True(os.IsNotExist(err)) // refused before any database was made
}

// TestServe_ReloadIntervalFollowsTheFile: with --reload-interval a
// changed file is reloaded with no signal, as a Kubernetes ConfigMap
// mounted as a file is replaced.
func TestServe_ReloadIntervalFollowsTheFile(t *testing.T) {
	is := is.New(t)
	up := &keyUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	db := newDB(t)
	code, key, _ := run(t, db, "keys", "create", "--account", "acme")
	is.Equal(code, 0) // keys create
	key = strings.TrimSpace(key)
	code, _, _ = run(t, db, "credits", "add", "--account", "acme", "100")
	is.Equal(code, 0) // credits add
	// A ConfigMap's files are symbolic links to a directory that is
	// replaced whole: the same here.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "svcgw.yaml")
	write := func(gen, doc string) {
		t.Helper()
		is.NoErr(os.MkdirAll(filepath.Join(dir, gen), 0o700))
		is.NoErr(os.WriteFile(filepath.Join(dir, gen, "svcgw.yaml"), []byte(doc), 0o600))
		_ = os.Remove(cfg + ".new")
		is.NoErr(os.Symlink(filepath.Join(dir, gen, "svcgw.yaml"), cfg+".new"))
		is.NoErr(os.Rename(cfg+".new", cfg))
	}
	write("a", reloadConfig(upstream.URL, "key-one", "1", "2"))
	srv := startServer(t, db, "--config", cfg, "--reload-interval", "50ms")
	client := &http.Client{Timeout: 10 * time.Second}
	status, _, _, _ := call(t, client, srv.addr, key)
	is.Equal(status, http.StatusOK)
	is.Equal(up.lastAuth(), "Bearer key-one")

	write("b", reloadConfig(upstream.URL, "key-two", "1", "2"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, _, _ := call(t, client, srv.addr, key)
		is.Equal(status, http.StatusOK)
		if up.lastAuth() == "Bearer key-two" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the changed file was not reloaded: %s", srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newAdminToken creates an admin token on db (svcgw admin tokens create)
// and returns its secret.
func newAdminToken(t *testing.T, db string, readOnly bool) string {
	t.Helper()
	args := []string{"admin", "tokens", "create", "--name", fmt.Sprintf("test-%d", adminTokens.Add(1))}
	if readOnly {
		args = append(args, "--read-only")
	}
	code, out, stderr := run(t, db, args...)
	if code != 0 {
		t.Fatalf("admin tokens create: %s", stderr)
	}
	return strings.TrimSpace(out)
}

var adminTokens atomic.Int64

// TestConfigReload_NeedsAnAdminToken: the admin listener refuses a reload
// without a token, with a read-only one, and with a revoked one; the
// command says so, and asks for one before sending anything.
func TestConfigReload_NeedsAnAdminToken(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	admin := freeAddr(t)
	serve(t, db, "--admin-addr", admin)
	code, _, stderr := run(t, db, "config", "reload", "--admin-addr", admin)
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "SVCGW_ADMIN_TOKEN")) // asked for before sending
	code, _, stderr = run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", "svcgw_admin_nope")
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "401")) // unknown token
	code, _, stderr = run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", newAdminToken(t, db, true))
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "403")) // read-only
	is.True(strings.Contains(stderr, "read-only"))
	tok := newAdminToken(t, db, false)
	code, _, stderr = run(t, db, "admin", "tokens", "revoke", "test-"+strconv.FormatInt(adminTokens.Load(), 10))
	is.Equal(code, 0) // revoke
	code, _, stderr = run(t, db, "config", "reload", "--admin-addr", admin, "--admin-token", tok)
	is.Equal(code, 1)
	is.True(strings.Contains(stderr, "401")) // revoked: refused at once

	// /healthz and /readyz stay open; /metrics and pprof do not.
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 401, "/debug/pprof/cmdline": 401} {
		resp, err := http.Get("http://" + admin + path)
		is.NoErr(err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
