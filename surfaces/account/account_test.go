package account_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/surfaces/account"
)

// testClock is an injectable clock that tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// newTestStore opens a store in t.TempDir() whose ledger never commits on
// its own (the batch interval is an hour), so every read a handler makes
// sees a recorded generation only if the handler called Sync.
func newTestStore(t *testing.T) (*sqlite.Store, *testClock, string) {
	t.Helper()
	clock := &testClock{t: time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "svcgw.db")
	st, err := sqlite.Open(context.Background(), path, store.Options{Now: clock.Now, BatchInterval: time.Hour})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, clock, path
}

// env is a handler over a store with two accounts, acme (two keys) and
// beta (one key), each with 10 USD of credit.
type env struct {
	st          *sqlite.Store
	clock       *testClock
	path        string
	h           *account.Handler
	acme, acme2 store.Key
	beta        store.Key
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, clock, path := newTestStore(t)
	ctx := context.Background()
	e := &env{st: st, clock: clock, path: path}
	e.h = account.New(st, clock.Now, testWriteErr(t), account.Limits{})
	key := func(acct, label string) store.Key {
		a, _, err := st.EnsureAccount(ctx, acct)
		if err != nil {
			t.Fatalf("ensure account: %v", err)
		}
		_, k, err := st.CreateKey(ctx, a.ID, label)
		if err != nil {
			t.Fatalf("create key: %v", err)
		}
		return k
	}
	e.acme, e.acme2, e.beta = key("acme", ""), key("acme", "ci"), key("beta", "")
	for _, k := range []store.Key{e.acme, e.beta} {
		ten, _, _ := apd.NewFromString("10")
		if _, err := st.AddCredits(ctx, k.AccountID, *ten, "test"); err != nil {
			t.Fatalf("add credits: %v", err)
		}
	}
	return e
}

// record enqueues a generation at the given time (without syncing).
func (e *env) record(t *testing.T, at time.Time, g store.Generation) {
	t.Helper()
	e.clock.Set(at)
	e.st.RecordGeneration(g)
}

// testWriteErr renders errors the way the server does, as the OpenAI-style
// envelope, and fails the test if a handler passes anything but an
// *llm.Error.
func testWriteErr(t *testing.T) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		var e *llm.Error
		if !errors.As(err, &e) {
			t.Errorf("writeErr got %T (%v), want *llm.Error", err, err)
			e = llm.AsError(err)
		}
		var param *string
		if e.Param != "" {
			param = &e.Param
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.Kind.Status())
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"message": e.Message, "type": string(e.Kind), "param": param, "code": string(e.Kind),
		}})
	}
}

type handlerFunc func(http.ResponseWriter, *http.Request, store.Key)

// call runs h for caller and returns the status and the decoded body.
func call(t *testing.T, h handlerFunc, method, target, body string, caller store.Key) (int, map[string]any) {
	t.Helper()
	var req *http.Request
	if body != "" {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	rec := httptest.NewRecorder()
	h(rec, req, caller)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("decode body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, got
}

// jsonOf decodes a JSON literal for comparison with a decoded body.
func jsonOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expected JSON %s: %v", s, err)
	}
	return v
}

// errorOf returns the error envelope's type and param ("" when null).
func errorOf(t *testing.T, body map[string]any) (kind, param string) {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error envelope in %v", body)
	}
	kind, _ = e["type"].(string)
	param, _ = e["param"].(string)
	return kind, param
}

func TestCredits(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	ctx := context.Background()
	status, body := call(t, e.h.Credits, "GET", "/svc/v1/credits", "", e.acme)
	is.Equal(status, 200) // credits
	is.Equal(body, jsonOf(t, `{"balance":"10.000000","total_used":"0.000000",
		"spend_today":"0.000000","spend_this_month":"0.000000","daily_cap":null,"monthly_cap":null,
		"key":{"id":"`+e.acme.ID+`","name":"default","spend_today":"0.000000","spend_this_month":"0.000000",
		       "daily_cap":null,"monthly_cap":null}}`)) // fresh account

	// Caps of the account and of the second key; the handler reports the
	// caller's key as authenticated, with its limits.
	_, err := e.st.UpdateAccountCaps(ctx, e.acme.AccountID, func(c *store.Caps) { c.Monthly = apd.New(20, 0) })
	is.NoErr(err)
	acme2, err := e.st.UpdateKeyLimits(ctx, e.acme2.ID, func(l *store.KeyLimits) { l.DailyCap = apd.New(15, -1) })
	is.NoErr(err)

	now := e.clock.Now() // 2025-03-10 12:00 UTC
	e.record(t, now.AddDate(0, 0, -9), store.Generation{ID: "chatcmpl-0", AccountID: e.acme.AccountID, KeyID: e.acme2.ID, Cost: money.Micros(100_000)})
	e.record(t, now.AddDate(0, -1, 0), store.Generation{ID: "chatcmpl-old", AccountID: e.acme.AccountID, KeyID: e.acme.ID, Cost: money.Micros(200_000)})
	e.record(t, now, store.Generation{ID: "chatcmpl-1", AccountID: e.acme.AccountID, KeyID: e.acme2.ID, Cost: money.Micros(500_000)})
	e.record(t, now, store.Generation{ID: "chatcmpl-2", AccountID: e.acme.AccountID, KeyID: e.acme.ID, Cost: money.Micros(250_000)})
	// No Sync here: the handler must make the calls that just completed visible.
	status, body = call(t, e.h.Credits, "GET", "/svc/v1/credits", "", acme2)
	is.Equal(status, 200) // credits after calls
	is.Equal(body, jsonOf(t, `{"balance":"8.950000","total_used":"1.050000",
		"spend_today":"0.750000","spend_this_month":"0.850000","daily_cap":null,"monthly_cap":"20.000000",
		"key":{"id":"`+e.acme2.ID+`","name":"ci","spend_today":"0.500000","spend_this_month":"0.600000",
		       "daily_cap":"1.500000","monthly_cap":null}}`)) // the account's spend, and the key's own

	status, body = call(t, e.h.Credits, "GET", "/svc/v1/credits", "", e.beta)
	is.Equal(status, 200)                          // other account
	is.Equal(body["balance"], "10.000000")         // untouched
	is.Equal(body["spend_this_month"], "0.000000") // nothing of acme's
}

func TestGeneration(t *testing.T) {
	e := newEnv(t)
	at := time.Date(2025, 3, 10, 12, 30, 15, 250*int(time.Millisecond), time.UTC)
	e.record(t, at, store.Generation{
		ID: "chatcmpl-abc", AccountID: e.acme.AccountID, KeyID: e.acme2.ID,
		Application: "my-app", Surface: "chat", Model: "svc-fusion",
		RequestType: "code", Tier: "medium", Streamed: true, FinishReason: "tool_calls",
		PromptTokens: 1200, CompletionTokens: 300, CachedPromptTokens: 1000, ReasoningTokens: 50,
		Cost: money.Micros(1234), LatencyMS: 850, GenerationTimeMS: 700,
	})
	e.record(t, at, store.Generation{ID: "msg_beta", AccountID: e.beta.AccountID, KeyID: e.beta.ID, Cost: money.Micros(1_000_000)})
	e.record(t, at, store.Generation{
		ID: "emb-abc", AccountID: e.acme.AccountID, KeyID: e.acme.ID, Application: "rag", Surface: "chat",
		Model: "text-embedding-3-small", RequestType: "embedding", Tier: "medium",
		PromptTokens: 40, Cost: money.Micros(4), LatencyMS: 3, GenerationTimeMS: 2,
	})

	tests := []struct {
		name   string
		target string
		caller store.Key
		status int
		want   string // the whole body, or the error's param
	}{
		{"found", "/svc/v1/generation?id=chatcmpl-abc", e.acme, 200, `{"data":{
			"id":"chatcmpl-abc","request_type":"code","created_at":"2025-03-10T12:30:15.25Z",
			"streamed":true,"finish_reason":"tool_calls","total_cost":"0.001234",
			"usage":{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,
			         "cached_prompt_tokens":1000,"reasoning_tokens":50},
			"latency_ms":850,"generation_time_ms":700,"application":"my-app","model":"svc-fusion"}}`},
		{"an embedding: finish_reason null", "/svc/v1/generation?id=emb-abc", e.acme, 200, `{"data":{
			"id":"emb-abc","request_type":"embedding","created_at":"2025-03-10T12:30:15.25Z",
			"streamed":false,"finish_reason":null,"total_cost":"0.000004",
			"usage":{"prompt_tokens":40,"completion_tokens":0,"total_tokens":40,
			         "cached_prompt_tokens":0,"reasoning_tokens":0},
			"latency_ms":3,"generation_time_ms":2,"application":"rag","model":"text-embedding-3-small"}}`},
		{"missing id", "/svc/v1/generation", e.acme, 400, "id"},
		{"empty id", "/svc/v1/generation?id=", e.acme, 400, "id"},
		{"unknown id", "/svc/v1/generation?id=chatcmpl-zzz", e.acme, 404, "id"},
		{"another account's id", "/svc/v1/generation?id=msg_beta", e.acme, 404, "id"},
		{"owner sees its own", "/svc/v1/generation?id=msg_beta", e.beta, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			status, body := call(t, e.h.Generation, "GET", tt.target, "", tt.caller)
			is.Equal(status, tt.status) // status
			switch {
			case status == 200 && tt.want != "":
				is.Equal(body, jsonOf(t, tt.want)) // the record
			case status != 200:
				kind, param := errorOf(t, body)
				is.Equal(param, tt.want)                     // offending parameter
				is.Equal(llm.Kind(kind).Status(), tt.status) // error kind
			}
		})
	}
}

func TestGeneration_PrunedByRetention(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	now := e.clock.Now() // 2025-03-10 12:00 UTC
	old := llm.NewIDAt("chatcmpl-", 24, now.AddDate(0, 0, -40))
	recent := llm.NewIDAt("msg_", 24, now.AddDate(0, 0, -10))
	fresh := llm.NewIDAt("gw", 22, now.AddDate(0, 0, -1))
	for _, g := range []struct {
		id string
		at time.Time
	}{{old, now.AddDate(0, 0, -40)}, {recent, now.AddDate(0, 0, -10)}, {fresh, now.AddDate(0, 0, -1)}} {
		e.record(t, g.at, store.Generation{ID: g.id, AccountID: e.acme.AccountID, KeyID: e.acme.ID, Cost: money.Micros(100_000)})
	}
	e.clock.Set(now)
	is.NoErr(e.st.Sync(context.Background()))
	status, _ := call(t, e.h.Generation, "GET", "/svc/v1/generation?id="+old, "", e.acme)
	is.Equal(status, 200) // before retention runs

	is.NoErr(e.st.StartUpkeep(store.UpkeepOptions{Retention: 7 * 24 * time.Hour, Interval: time.Millisecond}))
	deadline := time.Now().Add(30 * time.Second)
	for status == 200 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		status, _ = call(t, e.h.Generation, "GET", "/svc/v1/generation?id="+recent, "", e.acme)
	}
	is.Equal(status, 404) // pruned

	wantMsg := "This generation is older than the retention window: the detail of generations created before " +
		"2025-03-03T12:00:00Z has been deleted. Its cost still counts in usage and credits."
	for _, id := range []string{old, recent} {
		status, body := call(t, e.h.Generation, "GET", "/svc/v1/generation?id="+id, "", e.acme)
		is.Equal(status, 404)
		is.Equal(body["error"].(map[string]any)["message"], wantMsg) // says why
		status, body = call(t, e.h.Generation, "GET", "/svc/v1/generation?id="+id, "", e.beta)
		is.Equal(status, 404)
		is.Equal(body["error"].(map[string]any)["message"], wantMsg) // another account learns nothing more
	}
	status, _ = call(t, e.h.Generation, "GET", "/svc/v1/generation?id="+fresh, "", e.acme)
	is.Equal(status, 200) // inside the window
	status, body := call(t, e.h.Generation, "GET", "/svc/v1/generation?id="+llm.NewIDAt("chatcmpl-", 24, now), "", e.acme)
	is.Equal(status, 404)
	is.Equal(body["error"].(map[string]any)["message"], "No generation with this id was found for this account.") // never existed
	status, body = call(t, e.h.Generation, "GET", "/svc/v1/generation?id=chatcmpl-unknown", "", e.acme)
	is.Equal(status, 404)
	is.Equal(body["error"].(map[string]any)["message"], "No generation with this id was found for this account.") // not an id we issue

	// Feedback: a pruned response young enough to rate is a 404 saying
	// why; one too old to rate anyway is the usual 409.
	status, body = call(t, e.h.Feedback, "POST", "/svc/v1/feedback", `{"id":"`+recent+`","rating":"up"}`, e.acme)
	is.Equal(status, 404)
	is.Equal(body["error"].(map[string]any)["message"], wantMsg)
	status, _ = call(t, e.h.Feedback, "POST", "/svc/v1/feedback", `{"id":"`+old+`","rating":"up"}`, e.acme)
	is.Equal(status, 409)

	// Credits never change.
	status, body = call(t, e.h.Credits, "GET", "/svc/v1/credits", "", e.acme)
	is.Equal(status, 200)
	is.Equal(body["balance"], "9.700000")
	is.Equal(body["total_used"], "0.300000")
}
