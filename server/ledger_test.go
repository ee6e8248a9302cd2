package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// syncLog is a log destination shared by the gateway's goroutines and the
// test.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// ledgerFault fails every ledger commit while on (store.Options.CommitHook).
type ledgerFault struct{ on atomic.Bool }

func (f *ledgerFault) hook() error {
	if f.on.Load() {
		return errors.New("injected: database or disk is full")
	}
	return nil
}

// heldFixture is the fixture, except that calls for model "held" wait in
// the upstream until release is closed.
type heldFixture struct {
	fx      *fixture.Backend
	started chan struct{}
	release chan struct{}
}

func (h heldFixture) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req.Model == "held" {
		h.started <- struct{}{}
		<-h.release
	}
	return h.fx.Complete(ctx, req)
}

func (h heldFixture) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	return h.fx.Stream(ctx, req)
}

// The same call on each inference surface, and where its id is.
var surfaceCalls = []struct {
	name, path, body string
}{
	{"chat", "/svc/v1/chat/completions", `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`},
	{"messages", "/svc/v1/messages", capped16},
	{"gencontent", "/svc/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":16}}`},
}

// callID is the generation id of a 200's body, on any surface.
func callID(t *testing.T, body []byte) string {
	t.Helper()
	var m struct {
		ID         string `json:"id"`
		ResponseID string `json:"responseId"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.ID+m.ResponseID == "" {
		t.Fatalf("200 without an id: %s", body)
	}
	return m.ID + m.ResponseID
}

// TestLedgerFailure_RefusesHoldsAndRecordsOnRecovery: while the ledger
// cannot commit, every billable call on every surface is refused with a
// native 503 and Retry-After, readiness says why, the calls already
// admitted are answered and held — at most one generation per call in
// flight — and once the database recovers every answered call has its row
// and the account reconciles exactly. One Error line says why, once.
func TestLedgerFailure_RefusesHoldsAndRecordsOnRecovery(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var f ledgerFault
	var logs syncLog
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "svcgw.db"), store.Options{
		Logger: logger, CommitHook: f.hook, RetryInterval: 20 * time.Millisecond})
	is.NoErr(err) // open store
	const inFlight = 8
	backend := heldFixture{fx: fixture.New(fixture.Options{}),
		started: make(chan struct{}, inFlight), release: make(chan struct{})}
	gw := newTestGateway(t, withStore(st), withBackend(backend), func(o *Options) { o.Logger = logger })
	const credits = 10_000_000
	var ok []string
	call := func(path, body string) (*http.Response, []byte) {
		t.Helper()
		resp, out, err := gw.post(path, gw.Key, body)
		is.NoErr(err)
		if resp.StatusCode == http.StatusOK {
			ok = append(ok, callID(t, out))
		}
		return resp, out
	}
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		return gw.do(t, http.MethodGet, path, "")
	}

	// Healthy: every surface answers, and the gateway is ready.
	for _, c := range surfaceCalls {
		resp, _ := call(c.path, c.body)
		is.Equal(resp.StatusCode, http.StatusOK) // healthy call
	}
	is.NoErr(st.Sync(ctx)) // committed
	resp, body := get("/readyz")
	is.Equal(resp.StatusCode, http.StatusOK)
	is.Equal(strings.TrimSpace(string(body)), `{"status":"ready"}`)

	// Calls admitted before the failure, still in the upstream.
	var held sync.WaitGroup
	var heldOK atomic.Int64
	var heldMu sync.Mutex
	for range inFlight {
		held.Add(1)
		go func() {
			defer held.Done()
			resp, out, err := gw.post("/svc/v1/messages", gw.Key, strings.Replace(capped16, `"m"`, `"held"`, 1))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("held call: %v %s", err, out)
				return
			}
			heldOK.Add(1)
			heldMu.Lock()
			ok = append(ok, callID(t, out))
			heldMu.Unlock()
		}()
	}
	for range inFlight {
		<-backend.started
	}

	// The disk fills: the next commit fails, and the ledger with it.
	f.on.Store(true)
	heldMu.Lock()
	resp, _ = call(surfaceCalls[0].path, surfaceCalls[0].body)
	heldMu.Unlock()
	is.Equal(resp.StatusCode, http.StatusOK) // admitted before anyone knew
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, _ := get("/readyz"); resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readiness never reported the failing ledger")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Refused on every surface, in its own envelope, with Retry-After.
	for _, c := range surfaceCalls {
		for _, stream := range []bool{false, true} {
			path, body := c.path, c.body
			if stream {
				switch c.name {
				case "gencontent":
					path = strings.Replace(path, ":generateContent", ":streamGenerateContent?alt=sse", 1)
				default:
					body = strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
				}
			}
			heldMu.Lock()
			resp, out := call(path, body)
			heldMu.Unlock()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
				t.Errorf("%s (stream %v): %d Retry-After %q %s", c.name, stream, resp.StatusCode, resp.Header.Get("Retry-After"), out)
				continue
			}
			var env struct {
				Type  string `json:"type"`
				Error struct {
					Type   string `json:"type"`
					Status string `json:"status"`
					Code   any    `json:"code"`
				} `json:"error"`
			}
			is.NoErr(json.Unmarshal(out, &env)) // a JSON envelope
			switch c.name {
			case "chat":
				is.Equal(env.Error.Type, "service_unavailable_error")
			case "messages":
				is.Equal(env.Type, "error")
				is.Equal(env.Error.Type, "api_error")
			case "gencontent":
				is.Equal(env.Error.Status, "UNAVAILABLE")
			}
			is.True(!strings.Contains(string(out), "injected")) // the cause is the operator's
		}
	}
	// A storm of refusals: none admitted, so nothing more to hold.
	refused, other := gw.storm(t, 40, gw.Key, capped16)
	is.Equal(len(refused), 0)
	is.Equal(other[http.StatusServiceUnavailable], 40)

	// Account reads cannot be exact now: 503, not a stale balance.
	resp, out := get("/svc/v1/credits")
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
	is.Equal(resp.Header.Get("Retry-After"), "5")
	is.True(!strings.Contains(string(out), "injected"))
	// What does not bill still works, and the process is alive.
	resp, _ = gw.do(t, http.MethodPost, "/svc/v1/messages/count_tokens", capped16)
	is.Equal(resp.StatusCode, http.StatusOK)
	resp, _ = get("/healthz")
	is.Equal(resp.StatusCode, http.StatusOK)

	// The calls in flight finish: answered, and held in memory.
	close(backend.release)
	held.Wait()
	is.Equal(heldOK.Load(), int64(inFlight))
	h := gw.Server.Ready(ctx)
	is.True(!h.Ready())
	// The backlog is the calls admitted before the refusals began: the
	// calls in flight, and the one that found the ledger failing.
	is.Equal(h.Pending, int64(inFlight+1))
	resp, body = get("/readyz")
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
	var ready struct {
		Status             string `json:"status"`
		Database           string `json:"database"`
		Ledger             string `json:"ledger"`
		PendingGenerations int64  `json:"pending_generations"`
	}
	is.NoErr(json.Unmarshal(body, &ready))
	is.Equal(ready.Status, "unavailable")
	is.Equal(ready.Database, "")          // reads answer
	is.Equal(ready.Ledger, "unavailable") // the ledger does not; callers are not told why
	is.Equal(ready.PendingGenerations, int64(inFlight+1))
	// The admin listener says why.
	admin := httptest.NewServer(gw.Server.Admin(AdminOptions{Reload: func(context.Context) error { return nil }, OpenMetrics: true}))
	defer admin.Close()
	aresp, err := http.Get(admin.URL + "/readyz")
	is.NoErr(err)
	ready.Ledger = ""
	is.NoErr(json.NewDecoder(aresp.Body).Decode(&ready))
	aresp.Body.Close()
	is.Equal(aresp.StatusCode, http.StatusServiceUnavailable)
	is.True(strings.Contains(ready.Ledger, "failing since")) // the operator's detail
	is.True(strings.Contains(ready.Ledger, "disk is full") || strings.Contains(ready.Ledger, "injected"))

	// The disk has room again: everything held is recorded.
	f.on.Store(false)
	deadline = time.Now().Add(10 * time.Second)
	for {
		if resp, _ := get("/readyz"); resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readiness never recovered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range surfaceCalls {
		resp, _ := call(c.path, c.body)
		is.Equal(resp.StatusCode, http.StatusOK) // admitted again
	}
	resp, _ = get("/svc/v1/credits")
	is.Equal(resp.StatusCode, http.StatusOK)

	is.Equal(len(ok), 3+inFlight+1+3)
	acct := gw.reconcile(t, gw.Key, credits, ok) // a row per 200; balance = credits − Σ costs
	today, err := st.PeriodSpend(ctx, acct.ID, gw.KeyID, time.Now())
	is.NoErr(err)
	is.Equal(today.KeyDay, micros(t, acct.TotalUsed)) // spend_daily agrees
	is.Equal(today.AccountDay, micros(t, acct.TotalUsed))
	sp, err := st.Spend(ctx, acct.ID, gw.KeyID, time.Now())
	is.NoErr(err)
	is.Equal(sp.Total, micros(t, acct.TotalUsed)) // and so does admission's memory

	deadline = time.Now().Add(5 * time.Second)
	for logs.count("ledger recovered") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(logs.count("ledger cannot record generations"), 1) // said once
	is.Equal(logs.count("ledger recovered"), 1)                 // and its end
	is.Equal(logs.count("level=ERROR"), 1)                      // no Error line per call
	is.Equal(logs.count("generation dropped"), 0)
}

// scriptedStream is a backend whose streams send events and then fail
// with err (or end with no finish event when err is nil).
type scriptedStream struct {
	events []llm.Event
	err    error
}

func (b scriptedStream) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Kind: llm.KindUpstream, Message: "streams only"}
}

func (b scriptedStream) Stream(context.Context, *llm.Request) (upstream.Stream, error) {
	return &scriptedEvents{b: b, i: -1}, nil
}

type scriptedEvents struct {
	b scriptedStream
	i int
}

func (s *scriptedEvents) Next() bool       { s.i++; return s.i < len(s.b.events) }
func (s *scriptedEvents) Event() llm.Event { return s.b.events[s.i] }
func (s *scriptedEvents) Err() error       { return s.b.err }
func (s *scriptedEvents) Close() error     { return nil }

// TestStream_FailedMidwayIsBilledForWhatReachedTheCaller: a stream that
// fails (or breaks off) after delivering text is billed as one the caller
// left would be — the estimated input and the delivered output — and one
// that delivered nothing costs nothing.
func TestStream_FailedMidwayIsBilledForWhatReachedTheCaller(t *testing.T) {
	text := []llm.Event{
		{Type: llm.EventTextDelta, Text: "Once upon a time there was a gateway"},
		{Type: llm.EventTextDelta, Text: " that billed every token it delivered."},
	}
	overloaded := &llm.Error{Kind: llm.KindOverloaded, Message: "Overloaded"}
	tests := []struct {
		name   string
		b      scriptedStream
		billed bool
	}{
		{"failed after text", scriptedStream{events: text, err: overloaded}, true},
		{"ended without a finish event", scriptedStream{events: text}, true},
		{"failed before any text", scriptedStream{err: overloaded, events: []llm.Event{{Type: llm.EventTextDelta, Text: ""}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			gw := newTestGateway(t, withBackend(tc.b))
			const body = `{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"a story"}]}`
			resp, out, err := gw.post("/svc/v1/chat/completions", gw.Key, body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK)          // the stream had begun
			is.True(strings.Contains(string(out), `"error"`)) // then failed in-band
			is.True(!strings.Contains(string(out), "[DONE]")) // without the success terminator
			ids := mxIDs(string(out))
			is.True(len(ids) > 0)
			is.NoErr(gw.Store.Sync(context.Background()))
			g := gw.generation(t, ids[0])
			is.Equal(g.FinishReason, "error")
			if !tc.billed {
				is.Equal(g.TotalCost, "0.000000") // nothing delivered, nothing charged
				is.Equal(g.Usage.CompletionTokens, 0)
				return
			}
			want := llm.TextTokens(text[0].Text) + llm.TextTokens(text[1].Text)
			is.Equal(g.Usage.CompletionTokens, want) // the delivered output
			is.True(g.Usage.PromptTokens > 0)        // and the input
			is.True(g.TotalCost != "0.000000")
			acct := gw.account(t, gw.Key)
			is.Equal(acct.TotalUsed.String(), g.TotalCost) // charged
		})
	}
}
