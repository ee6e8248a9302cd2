package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// testGateway is a real gateway for end-to-end tests: a SQLite file in a
// temp dir, the fixture backend behind the router, and an httptest server.
//
//	gw := newTestGateway(t)
//	client := openai.NewClient(option.WithBaseURL(gw.URL+"/svc/v1"), option.WithAPIKey(gw.Key))
type testGateway struct {
	URL     string // base URL, without /svc
	Key     string // an llm_live_ key of account "acme" with $10.00 of credits
	KeyID   string // its public id
	Store   store.DB
	Server  *Server
	Fixture *fixture.Backend
	now     func() time.Time
}

// gatewayOption adjusts a test gateway before it starts.
type gatewayOption func(*Options)

// withStore serves from st, opened by the test (with options of its own);
// the gateway closes it at the end.
func withStore(st store.DB) gatewayOption { return func(o *Options) { o.Store = st } }

// openGatewayStore opens the gateway's database: SQLite, or PostgreSQL
// while TestPostgres_GatewayEndToEnd runs the gateway's tests on it.
var openGatewayStore = func(ctx context.Context, t *testing.T) (store.DB, error) {
	return sqlite.Open(ctx, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{})
}

// newTestGateway starts a gateway; everything is torn down with the test.
func newTestGateway(t *testing.T, opts ...gatewayOption) *testGateway {
	t.Helper()
	ctx := context.Background()
	st, err := openGatewayStore(ctx, t)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	fx := fixture.New(fixture.Options{})
	router := upstream.NewRouter([]upstream.Candidate{{Name: "fixture", Backend: fx, Limits: fx.Limits()}})
	o := Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Store:  st,
		Router: router,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.Store != st {
		// withStore gave one of its own: this one is not used.
		if err := st.Close(); err != nil {
			t.Fatalf("close store: %v", err)
		}
		st = o.Store
	}
	srv := New(o)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	gw := &testGateway{URL: hs.URL, Store: st, Server: srv, Fixture: fx}
	gw.Key, gw.KeyID = gw.newKey(t, "acme", "10")
	return gw
}

// newKey creates a key (and its account, if new) with credits added.
func (gw *testGateway) newKey(t *testing.T, account, credits string) (secret, id string) {
	t.Helper()
	ctx := context.Background()
	acct, _, err := gw.Store.EnsureAccount(ctx, account)
	if err != nil {
		t.Fatalf("ensure account: %v", err)
	}
	secret, key, err := gw.Store.CreateKey(ctx, acct.ID, "test-key")
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	if credits != "" {
		amt, _, err := apd.NewFromString(credits)
		if err != nil {
			t.Fatalf("credits: %v", err)
		}
		if _, err := gw.Store.AddCredits(ctx, acct.ID, *amt, "test"); err != nil {
			t.Fatalf("add credits: %v", err)
		}
	}
	return secret, key.ID
}

// do sends a request with the gateway key as a Bearer token and returns the
// response with its body read.
func (gw *testGateway) do(t *testing.T, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, gw.URL+path, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+gw.Key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// getJSON GETs path (with the gateway key), expects 200 and decodes into v.
func (gw *testGateway) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, body := gw.do(t, http.MethodGet, path, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decode: %v: %s", path, err, body)
	}
}

// credits is GET /svc/v1/credits.
type credits struct {
	Balance   string `json:"balance"`
	TotalUsed string `json:"total_used"`
}

func (gw *testGateway) credits(t *testing.T) credits {
	t.Helper()
	var c credits
	gw.getJSON(t, "/svc/v1/credits", &c)
	return c
}

// generation is the record GET /svc/v1/generation returns (inside "data").
type generation struct {
	ID           string `json:"id"`
	RequestType  string `json:"request_type"`
	CreatedAt    string `json:"created_at"`
	Streamed     bool   `json:"streamed"`
	FinishReason string `json:"finish_reason"`
	TotalCost    string `json:"total_cost"`
	Usage        struct {
		PromptTokens       int `json:"prompt_tokens"`
		CompletionTokens   int `json:"completion_tokens"`
		TotalTokens        int `json:"total_tokens"`
		CachedPromptTokens int `json:"cached_prompt_tokens"`
		ReasoningTokens    int `json:"reasoning_tokens"`
	} `json:"usage"`
	LatencyMS        int64  `json:"latency_ms"`
	GenerationTimeMS int64  `json:"generation_time_ms"`
	Application      string `json:"application"`
}

func (gw *testGateway) generation(t *testing.T, id string) generation {
	t.Helper()
	var g struct {
		Data generation `json:"data"`
	}
	gw.getJSON(t, "/svc/v1/generation?id="+id, &g)
	return g.Data
}

// usage is GET /svc/v1/usage.
type usage struct {
	Object  string   `json:"object"`
	GroupBy string   `json:"group_by"`
	Data    []bucket `json:"data"`
}

type bucket struct {
	Bucket            string `json:"bucket"`
	Requests          int64  `json:"requests"`
	InputTokens       int64  `json:"input_tokens"`
	OutputTokens      int64  `json:"output_tokens"`
	TotalTokens       int64  `json:"total_tokens"`
	CachedInputTokens int64  `json:"cached_input_tokens"`
	Cost              string `json:"cost"`
}

func (gw *testGateway) usage(t *testing.T, groupBy string) usage {
	t.Helper()
	var u usage
	gw.getJSON(t, "/svc/v1/usage?group_by="+groupBy, &u)
	return u
}

// feedback posts a rating for id and returns the status.
func (gw *testGateway) feedback(t *testing.T, id, rating string) int {
	t.Helper()
	resp, _ := gw.do(t, http.MethodPost, "/svc/v1/feedback", `{"id":"`+id+`","rating":"`+rating+`"}`)
	return resp.StatusCode
}

func TestGateway_Healthz(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	resp, err := http.Get(gw.URL + "/healthz")
	is.NoErr(err) // healthz
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK) // healthz needs no key
}

// openSignature opens a reasoning signature the gateway sealed.
func (gw *testGateway) openSignature(t *testing.T, tok string) string {
	t.Helper()
	sig, err := gw.Server.sealer.Open(sigPurpose, tok)
	if err != nil {
		t.Fatalf("signature %q does not open: %v", tok, err)
	}
	return string(sig)
}
