package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// fakeOpenAI is a chat-completions upstream that answers every call with a
// fixed reply naming its backend model, and records the model it was asked
// for.
func fakeOpenAI(t *testing.T, gotModel *string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		*gotModel = req.Model
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("OpenAI-Model", "canary-backend-7")
		io.WriteString(w, `{"id":"chatcmpl-upstream-secret","object":"chat.completion","created":1,"model":"canary-backend-7","system_fingerprint":"fp_canary",
			"choices":[{"index":0,"message":{"role":"assistant","content":"hello from upstream"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestServe_ConfigRoutesToAnOpenAIUpstream(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	var gotModel string
	up := fakeOpenAI(t, &gotModel)
	cfgPath := filepath.Join(dir, "svcgw.yaml")
	is.NoErr(os.WriteFile(cfgPath, []byte(`
upstreams:
  local:
    protocol: openai
    base_url: `+up.URL+`/v1
    api_key: ${LOCAL_KEY:-none}
    models:
      canary-backend-7: {context_length: 8192, max_completion_tokens: 1024}
routes:
  default: [local/canary-backend-7]
`), 0o600))
	db := filepath.Join(dir, "svcgw.db")
	run(t, db, "init")
	code, key, _ := run(t, db, "keys", "create", "--account", "acme")
	is.Equal(code, 0)
	key = strings.TrimSpace(key)
	run(t, db, "credits", "add", "--account", "acme", "5")

	code, out, _ := run(t, db, "config", "check", cfgPath)
	is.Equal(code, 0) // config check accepts it
	is.True(strings.Contains(out, "ok"))

	addr, _ := serve(t, db, "--config", cfgPath)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
		strings.NewReader(`{"model":"my-intent","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK) // served
	is.Equal(gotModel, "canary-backend-7")   // the configured backend model went upstream
	is.True(strings.Contains(string(body), "hello from upstream"))
	is.True(strings.Contains(string(body), `"model":"my-intent"`)) // the caller's id echoed
	for k, v := range resp.Header {
		is.True(!strings.Contains(strings.ToLower(k+strings.Join(v, "")), "canary")) // no header leaks the backend
	}
	is.True(!strings.Contains(string(body), "canary")) // nor the body
	is.True(!strings.Contains(string(body), "upstream-secret"))

	// The models endpoint reports the configured limits.
	req, _ = http.NewRequest(http.MethodGet, "http://"+addr+"/svc/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	is.True(strings.Contains(string(body), `"context_length":8192`))
	is.True(strings.Contains(string(body), `"max_completion_tokens":1024`))
}

func TestConfigCheck_ReportsLines(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	is.NoErr(os.WriteFile(path, []byte("upstreams:\n  a:\n    protocol: grpc\n    models: {m: {}}\nroutes:\n  default: [a/m]\n"), 0o600))
	code, _, stderr := run(t, filepath.Join(dir, "x.db"), "config", "check", path)
	is.Equal(code, 1)                                     // rejected
	is.True(strings.Contains(stderr, path+":3: "))        // file:line
	is.True(strings.Contains(stderr, "unknown protocol")) // the reason
}

func TestConfigCheck_ReadsSVCGWConfig(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "svcgw.yaml")
	is.NoErr(os.WriteFile(path, []byte("upstreams:\n  a:\n    protocol: fixture\n    models: {m: {}}\nroutes:\n  default: [a/m]\n"), 0o600))
	code, _, stderr := run(t, filepath.Join(dir, "x.db"), "config", "check")
	is.Equal(code, 1)                                 // no file
	is.True(strings.Contains(stderr, "SVCGW_CONFIG")) // says how to name one
	t.Setenv("SVCGW_CONFIG", path)
	code, out, _ := run(t, filepath.Join(dir, "x.db"), "config", "check")
	is.Equal(code, 0) // the file serve --config would read
	is.Equal(strings.TrimSpace(strings.Split(out, "\n")[0]), path+": ok")
}

func TestConfigCheck_EveryErrorInOnePass(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "svcgw.yaml")
	is.NoErr(os.WriteFile(path, []byte(`upstreams:
  a:
    protocol: fixture
    models: {m: {}}
routes:
  default: [a/nope]
limits:
  max_body_byte: 1000
`), 0o600))
	code, out, stderr := run(t, filepath.Join(dir, "x.db"), "config", "check", path)
	is.Equal(code, 1) // rejected
	is.Equal(out, "")
	is.Equal(stderr, path+`:6: candidate "a/nope": upstream "a" declares no model "nope"`+"\n"+
		path+`:8: unknown key "max_body_byte" in limits (did you mean max_body_bytes?)`+"\n"+
		path+": 2 error(s)\n")
}

// config check says where each error is and what it means: the key of a
// negative limit, a tab for what it is.
func TestConfigCheck_ErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"negative rpm", "limits:\n  rpm: -5\n", ":2: limits.rpm must not be negative"},
		{"a tab", "limits:\n\trpm: 5\n", ":2: found character that cannot start any token (a tab? YAML indents with spaces only)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			f := filepath.Join(t.TempDir(), "svcgw.yaml")
			is.NoErr(os.WriteFile(f, []byte(tc.doc), 0o600))
			code, _, stderr := run(t, filepath.Join(t.TempDir(), "svcgw.db"), "config", "check", f)
			is.Equal(code, 1)
			is.True(strings.Contains(stderr, f+tc.want)) // file:line and the meaning
		})
	}
}
