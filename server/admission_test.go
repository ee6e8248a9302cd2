package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// testClock is a hand-moved clock for Options.Now.
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

func withClock(c *testClock) gatewayOption { return func(o *Options) { o.Now = c.Now } }

// withBackend serves every route with b.
func withBackend(b upstream.Backend) gatewayOption {
	return func(o *Options) {
		o.Router = upstream.NewRouter([]upstream.Candidate{{Name: "test", Backend: b,
			Limits: upstream.Limits{ContextLength: 200000, MaxCompletionTokens: 32000}}})
	}
}

// post sends body to path with key as a Bearer token. It is safe to call
// from any goroutine (it never fails the test itself).
func (gw *testGateway) post(path, key, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, gw.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// account returns the committed account after the ledger has caught up.
func (gw *testGateway) account(t *testing.T, key string) store.Account {
	t.Helper()
	ctx := context.Background()
	k, err := gw.Store.Authenticate(ctx, key)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	if err := gw.Store.Sync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	a, err := gw.Store.AccountByID(ctx, k.AccountID)
	if err != nil {
		t.Fatalf("account: %v", err)
	}
	return a
}

// ledgerTotals are an account's generation rows, summed.
func (gw *testGateway) ledgerTotals(t *testing.T, accountID int64) (rows int64, costs apd.Decimal) {
	t.Helper()
	bs, err := gw.Store.Usage(context.Background(), accountID, store.UsageQuery{GroupBy: store.GroupByDay})
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	for _, b := range bs {
		rows += b.Requests
		if _, err := apd.BaseContext.Add(&costs, &costs, &b.Cost); err != nil {
			t.Fatal(err)
		}
	}
	return rows, costs
}

func micros(t *testing.T, d apd.Decimal) int64 {
	t.Helper()
	n, err := billing.ToMicros(d)
	if err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

func usd(n int64) string { return money.Micros(n).String() }

// probeCost makes one call with body on path and returns its charge in
// micro-dollars, read from its generation record.
func (gw *testGateway) probeCost(t *testing.T, path, body string) int64 {
	t.Helper()
	resp, out, err := gw.post(path, gw.Key, body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("probe: %v %s", err, out)
	}
	var m struct{ ID string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if err := gw.Store.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := gw.generation(t, m.ID)
	d, _, err := apd.NewFromString(g.TotalCost)
	if err != nil {
		t.Fatal(err)
	}
	return micros(t, *d)
}

const (
	capped16     = `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	chatCapped16 = capped16 // the same body is valid chat-completions
)

// storm sends n calls of body at once with key and returns the ids of the
// 200s and the statuses of the others.
func (gw *testGateway) storm(t *testing.T, n int, key, body string) (ok []string, other map[int]int) {
	t.Helper()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	other = map[int]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, out, err := gw.post("/svc/v1/messages", key, body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("call: %v", err)
			case resp.StatusCode == http.StatusOK:
				var m struct{ ID string }
				if err := json.Unmarshal(out, &m); err != nil || m.ID == "" {
					t.Errorf("200 without an id: %s", out)
				}
				ok = append(ok, m.ID)
			default:
				other[resp.StatusCode]++
				if resp.StatusCode == http.StatusPaymentRequired && !strings.Contains(string(out), "billing_error") {
					t.Errorf("402 not in the messages envelope: %s", out)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	return ok, other
}

// reconcile checks the ledger invariants of an account after a storm:
// balance = credits − Σ costs, total_used = Σ costs, one generation row per
// 200 (and none for the refusals).
func (gw *testGateway) reconcile(t *testing.T, key string, credits int64, ok []string) store.Account {
	t.Helper()
	is := is.New(t)
	acct := gw.account(t, key)
	rows, costs := gw.ledgerTotals(t, acct.ID)
	is.Equal(rows, int64(len(ok)))                              // one generation row per 200, none for refusals
	is.Equal(micros(t, acct.TotalUsed), micros(t, costs))       // total_used == Σ costs
	is.Equal(micros(t, acct.Balance), credits-micros(t, costs)) // balance == credits − Σ costs
	for _, id := range ok {
		if _, err := gw.Store.Generation(context.Background(), acct.ID, id); err != nil {
			t.Errorf("200 %s has no generation row: %v", id, err)
		}
	}
	return acct
}

func TestAdmission_ConcurrentCallsCannotOverdraw(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	cost := gw.probeCost(t, "/svc/v1/messages", capped16)
	// With max_tokens ≤ 4096 the reservation covers the call exactly:
	// the fixture reports the input estimate and stops at max_tokens.
	req := &llm.Request{MaxTokens: 16, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	ceiling := billing.DefaultPrices().Ceiling(llm.TypePro, llm.TierMedium, req, req.InputTokens(), 16)
	is.Equal(cost, ceiling) // the probe cost its reservation

	credits := 50*cost + cost/2 // about 50 calls
	key, _ := gw.newKey(t, "tight", usd(credits))
	ok, other := gw.storm(t, 200, key, capped16)
	t.Logf("200: %d, others: %v", len(ok), other)
	is.Equal(len(ok)+other[http.StatusPaymentRequired], 200) // every call either ran or was refused with 402
	is.Equal(len(ok), 50)                                    // exactly what the balance covers

	acct := gw.reconcile(t, key, credits, ok)
	is.True(acct.Balance.Sign() >= 0) // no overdraft at all
	is.Equal(micros(t, acct.Balance), cost/2)
}

// overspender is the fixture, except that every reply reports output tokens
// far beyond what was reserved (as a backend ignoring max_tokens would).
type overspender struct {
	fx     *fixture.Backend
	output int
}

func (o overspender) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := o.fx.Complete(ctx, req)
	if resp != nil {
		resp.Usage.OutputTokens = o.output
	}
	return resp, err
}

func (o overspender) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	return nil, errors.New("not streamed in this test")
}

func TestAdmission_OverdraftIsBoundedByUnreservedOutput(t *testing.T) {
	is := is.New(t)
	const output = 10000 // 5904 tokens beyond the 4096 reserved
	gw := newTestGateway(t, withBackend(overspender{fx: fixture.New(fixture.Options{}), output: output}))
	const body = `{"model":"m","max_tokens":20000,"messages":[{"role":"user","content":"hi"}]}`
	cost := gw.probeCost(t, "/svc/v1/messages", body)
	req := &llm.Request{MaxTokens: 20000, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	prices := billing.DefaultPrices()
	ceiling := prices.Ceiling(llm.TypePro, llm.TierMedium, req, req.InputTokens(), billing.ReserveOutputTokens)
	excess := cost - ceiling // what each call costs beyond its reservation
	is.True(excess > 0)      // this backend does overspend

	credits := 50 * ceiling
	key, _ := gw.newKey(t, "overspent", usd(credits))
	ok, other := gw.storm(t, 200, key, body)
	t.Logf("200: %d, others: %v, excess per call %s", len(ok), other, usd(excess))
	is.Equal(len(ok)+other[http.StatusPaymentRequired], 200)

	acct := gw.reconcile(t, key, credits, ok)
	bound := int64(len(ok)) * excess // the documented bound: Σ (actual − reserved)
	is.True(micros(t, acct.Balance) >= -bound)
	is.True(len(ok) <= 50) // never more calls than the reservations allowed
	resp, _, err := gw.post("/svc/v1/messages", key, body)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusPaymentRequired) // and none once overdrawn
}

// failing fails every call before producing anything.
type failing struct{}

func (failing) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}
}

func (failing) Stream(context.Context, *llm.Request) (upstream.Stream, error) {
	return nil, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}
}

func TestAdmission_FailedCallsCostNothingAndReleaseTheirReservation(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t, withBackend(failing{}))
	req := &llm.Request{MaxTokens: 16, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}}
	ceiling := billing.DefaultPrices().Ceiling(llm.TypePro, llm.TierMedium, req, req.InputTokens(), 16)
	key, _ := gw.newKey(t, "once", usd(ceiling)) // exactly one reservation
	for range 5 {
		resp, _, err := gw.post("/svc/v1/messages", key, capped16)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusBadGateway) // failed, not refused: the last one released
	}
	resp, _, err := gw.post("/svc/v1/messages", key, strings.Replace(capped16, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusBadGateway) // a stream that fails before its first event too
	acct := gw.account(t, key)
	rows, _ := gw.ledgerTotals(t, acct.ID)
	is.Equal(rows, int64(0))                   // nothing recorded
	is.Equal(micros(t, acct.Balance), ceiling) // nothing charged
}

func TestAdmission_CreditsAddedByAnotherProcessAreSeenAtOnce(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	key, _ := gw.newKey(t, "broke", "")
	resp, _, err := gw.post("/svc/v1/messages", key, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusPaymentRequired) // broke
	is.Equal(resp.Header.Get("Retry-After"), "")          // waiting will not help

	// `svcgw credits add` runs in another process: a second Store on the
	// same file stands in for it.
	other, err := sqlite.Open(context.Background(), gw.Store.(*sqlite.Store).Path(), store.Options{})
	is.NoErr(err)
	acct, err := other.AccountByName(context.Background(), "broke")
	is.NoErr(err)
	_, err = other.AddCredits(context.Background(), acct.ID, *apd.New(1, 0), "cli")
	is.NoErr(err)
	is.NoErr(other.Close())

	resp, _, err = gw.post("/svc/v1/messages", key, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // no waiting for the budget cache
}

// capStatus makes one chat call and returns its status, the Retry-After
// header and the error message (if any).
func capStatus(t *testing.T, gw *testGateway, key string) (int, string, string) {
	t.Helper()
	resp, out, err := gw.post("/svc/v1/chat/completions", key, chatCapped16)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal(out, &e)
	return resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Message
}

func TestCaps_DailyAndMonthlyAcrossBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		monthly bool
		key     bool
		want    string
	}{
		{"account daily", false, false, "the account's daily cap"},
		{"account monthly", true, false, "the account's monthly cap"},
		{"key daily", false, true, "this key's daily cap"},
		{"key monthly", true, true, "this key's monthly cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			clock := &testClock{t: time.Date(2026, 1, 31, 23, 0, 0, 0, time.UTC)}
			gw := newTestGateway(t, withClock(clock), func(o *Options) { o.BudgetRefresh = time.Nanosecond })
			cost := gw.probeCost(t, "/svc/v1/chat/completions", chatCapped16) // on acme, not the capped account
			key, keyID := gw.newKey(t, "capped", "100")
			sibling, _ := gw.newKey(t, "capped", "")
			cp := money.Micros(2*cost + cost/2).Decimal() // two calls fit, not three
			if tc.key {
				_, err := gw.Store.UpdateKeyLimits(ctx, keyID, func(l *store.KeyLimits) {
					if tc.monthly {
						l.MonthlyCap = &cp
					} else {
						l.DailyCap = &cp
					}
				})
				is.NoErr(err)
			} else {
				acct, err := gw.Store.AccountByName(ctx, "capped")
				is.NoErr(err)
				_, err = gw.Store.UpdateAccountCaps(ctx, acct.ID, func(c *store.Caps) {
					if tc.monthly {
						c.Monthly = &cp
					} else {
						c.Daily = &cp
					}
				})
				is.NoErr(err)
			}

			for range 2 {
				st, _, _ := capStatus(t, gw, key)
				is.Equal(st, http.StatusOK) // within the cap
			}
			st, retry, msg := capStatus(t, gw, key)
			is.Equal(st, http.StatusPaymentRequired) // the third call meets the cap
			is.True(strings.Contains(msg, tc.want))  // the message names the cap
			is.True(strings.Contains(msg, "resets at 2026-02-01T00:00:00Z"))
			is.Equal(retry, "3600") // Jan 31 23:00 → Feb 1 00:00 (day and month alike)
			st, _, _ = capStatus(t, gw, sibling)
			if tc.key {
				is.Equal(st, http.StatusOK) // another key of the account is not capped by this key's cap
			} else {
				is.Equal(st, http.StatusPaymentRequired) // the account's cap binds all its keys
			}

			// Across midnight, which is also the start of a month.
			clock.Set(time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC))
			st, _, _ = capStatus(t, gw, key)
			is.Equal(st, http.StatusOK) // a new day and a new month
			st, _, _ = capStatus(t, gw, key)
			is.Equal(st, http.StatusOK) // two fit again
			if !tc.key {
				st, _, _ = capStatus(t, gw, sibling)
				is.Equal(st, http.StatusPaymentRequired) // shared with the sibling: three is over
			} else {
				st, _, _ = capStatus(t, gw, key)
				is.Equal(st, http.StatusPaymentRequired) // three is over
			}

			// The next day: a daily cap resets, a monthly one does not.
			clock.Set(time.Date(2026, 2, 2, 12, 0, 0, 0, time.UTC))
			st, retry, msg = capStatus(t, gw, key)
			if tc.monthly {
				is.Equal(st, http.StatusPaymentRequired) // still February
				is.True(strings.Contains(msg, "resets at 2026-03-01T00:00:00Z"))
				is.Equal(retry, strconv.Itoa(int((26*24+12)*time.Hour/time.Second))) // Feb 2 12:00 → Mar 1
				clock.Set(time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC))
				st, retry, _ = capStatus(t, gw, key)
				is.Equal(st, http.StatusPaymentRequired) // the last second of February
				is.Equal(retry, "1")
				clock.Set(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
				st, _, _ = capStatus(t, gw, key)
				is.Equal(st, http.StatusOK) // March
			} else {
				is.Equal(st, http.StatusOK) // a new day
			}

			gw.balanced(t, key, 100_000_000)
		})
	}
}

// balanced checks that the account's balance is its credits less the sum
// of its generation rows, and total_used that sum.
func (gw *testGateway) balanced(t *testing.T, key string, credits int64) {
	t.Helper()
	acct := gw.account(t, key)
	_, costs := gw.ledgerTotals(t, acct.ID)
	if micros(t, acct.TotalUsed) != micros(t, costs) || micros(t, acct.Balance) != credits-micros(t, costs) {
		t.Errorf("ledger: balance %s, total_used %s; credits %s, Σ costs %s",
			acct.Balance.String(), acct.TotalUsed.String(), usd(credits), costs.String())
	}
}

// rateSurfaces is one inference call per surface, for rate limits.
var rateSurfaces = []struct{ surface, path, body string }{
	{"chat", "/svc/v1/chat/completions", chatBody},
	{"messages", "/svc/v1/messages", messagesBody},
	{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", genBody},
}

func TestRateLimit_RequestsPerMinute429OnEverySurface(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock), func(o *Options) { o.RPM = 2 })
	for _, r := range rateSurfaces {
		t.Run(r.surface, func(t *testing.T) {
			is := is.New(t)
			key, _ := gw.newKey(t, "rl-"+r.surface, "10")
			for range 2 {
				resp, _, err := gw.post(r.path, key, r.body)
				is.NoErr(err)
				is.Equal(resp.StatusCode, http.StatusOK) // within 2 per minute
			}
			resp, out, err := gw.post(r.path, key, r.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusTooManyRequests) // the third in the minute
			surface, typ := envelopeKind(t, out)
			is.Equal(surface, r.surface)                   // native envelope
			is.Equal(resp.Header.Get("Retry-After"), "30") // a request's worth refills in 30s
			switch r.surface {
			case "chat":
				is.Equal(typ, "requests")
				is.Equal(resp.Header.Get("Retry-After-Ms"), "30000")
				is.True(strings.Contains(string(out), `"rate_limit_exceeded"`))
			case "messages":
				is.Equal(typ, "rate_limit_error")
				is.Equal(resp.Header.Get("Retry-After-Ms"), "30000")
			case "gencontent":
				is.Equal(typ, "RESOURCE_EXHAUSTED")
				is.True(strings.Contains(string(out), `"retryDelay":"30s"`)) // RetryInfo
			}

			// Count-tokens endpoints share the bucket (see
			// TestRateLimit_CountAndFeedbackShareTheKeysRPM); reads that never
			// reach a model are not rate limited.
			cresp, _, err := gw.post("/svc/v1/messages/count_tokens", key, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			is.NoErr(err)
			is.Equal(cresp.StatusCode, http.StatusTooManyRequests) // count_tokens
			mresp, _ := gw.do(t, http.MethodGet, "/svc/v1/models", "", "Authorization", "Bearer "+key)
			is.Equal(mresp.StatusCode, http.StatusOK) // models
			aresp, _ := gw.do(t, http.MethodGet, "/svc/v1/credits", "", "Authorization", "Bearer "+key)
			is.Equal(aresp.StatusCode, http.StatusOK) // credits

			clock.Set(clock.Now().Add(30 * time.Second))
			resp, _, err = gw.post(r.path, key, r.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK) // refilled after Retry-After
		})
	}
}

// Count-tokens endpoints read and decode whole bodies and feedback writes
// rows: they are free, but they count against the key's requests per
// minute, even for a key without credit, and are refused before the body
// is read.
func TestRateLimit_CountAndFeedbackShareTheKeysRPM(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock), func(o *Options) { o.RPM = 2 })
	id := func(t *testing.T) string {
		resp, out := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chat: %d %s", resp.StatusCode, out)
		}
		var v struct{ ID string }
		_ = json.Unmarshal(out, &v)
		return v.ID
	}(t)
	for _, c := range []struct{ name, surface, path, body string }{
		{"count_tokens", "messages", "/svc/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"countTokens", "gencontent", "/svc/v1beta/models/gemini-2.5-flash:countTokens", `{"contents":[{"parts":[{"text":"hi"}]}]}`},
		{"input_tokens", "chat", "/svc/v1/responses/input_tokens", `{"model":"m","input":"hi"}`},
		{"feedback", "chat", "/svc/v1/feedback", `{"id":"` + id + `","rating":"up"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			key, _ := gw.newKey(t, "free-"+c.name, "") // no credit at all
			for range 2 {
				resp, out, err := gw.post(c.path, key, c.body)
				is.NoErr(err)
				if c.name == "feedback" {
					is.Equal(resp.StatusCode, http.StatusNotFound) // another account's id: still a request
					continue
				}
				is.Equal(resp.StatusCode, http.StatusOK) // free, within 2 per minute
				_ = out
			}
			resp, out, err := gw.post(c.path, key, c.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusTooManyRequests) // the third in the minute
			surface, _ := envelopeKind(t, out)
			is.Equal(surface, c.surface) // native envelope
			is.Equal(resp.Header.Get("Retry-After"), "30")

			// A slow 16 MB body is refused on its headers: nothing is read.
			rc := dialRaw(t, gw.URL)
			rc.headers(t, c.path, key, 16<<20)
			_, _ = io.WriteString(rc.c, "{")
			r2, closed := rc.response(t, 5*time.Second)
			is.Equal(r2.StatusCode, http.StatusTooManyRequests)
			is.True(closed)
		})
	}
}

// The free endpoints also have a budget of request bytes per key, on by
// default whatever the requests per minute: a key with no money cannot
// keep the gateway's cores busy decoding and counting big bodies.
func TestRateLimit_FreeEndpointsHaveABytesBudgetByDefault(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock)) // no rpm; the default free budget
	// Bodies of 8 MiB: the default budget, 32 MiB a minute, takes four.
	big := strings.Repeat("word ", 8<<20/5-40) // a little under, with the JSON around it
	for _, c := range []struct{ name, surface, path, body string }{
		{"count_tokens", "messages", "/svc/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"` + big + `"}]}`},
		{"countTokens", "gencontent", "/svc/v1beta/models/gemini-2.5-flash:countTokens", `{"contents":[{"parts":[{"text":"` + big + `"}]}]}`},
		{"input_tokens", "chat", "/svc/v1/responses/input_tokens", `{"model":"m","input":"` + big + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			key, _ := gw.newKey(t, "free-bytes-"+c.name, "") // no credit at all
			for range 4 {
				resp, _, err := gw.post(c.path, key, c.body)
				is.NoErr(err)
				is.Equal(resp.StatusCode, http.StatusOK) // within the minute's 32 MiB
			}
			resp, out, err := gw.post(c.path, key, c.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusTooManyRequests) // the fifth 8 MiB in the minute
			surface, _ := envelopeKind(t, out)
			is.Equal(surface, c.surface) // native envelope
			is.True(strings.Contains(string(out), "32 MiB of request bodies a minute"))
			wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			is.NoErr(err)
			is.True(wait >= 14 && wait <= 16) // until 8 MiB more have come back: a quarter of a minute

			// Small counts are refused too until then: a request costs
			// at least 4 KiB.
			small, _, err := gw.post(c.path, key, strings.Replace(c.body, big, "hi", 1))
			is.NoErr(err)
			is.Equal(small.StatusCode, http.StatusTooManyRequests) // the bucket is empty

			// Another key has its own budget.
			other, _ := gw.newKey(t, "free-bytes-other-"+c.name, "")
			resp, _, err = gw.post(c.path, other, c.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK) // per key

			clock.Set(clock.Now().Add(time.Duration(wait) * time.Second))
			resp, _, err = gw.post(c.path, key, c.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK) // refilled after Retry-After
		})
	}
}

// A configured budget replaces the default, and a negative one turns it
// off.
func TestRateLimit_FreeBytesPerMinuteIsConfigurable(t *testing.T) {
	is := is.New(t)
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 6000) + `"}]}`
	gw := newTestGateway(t, withClock(clock), func(o *Options) { o.FreeBytesPerMinute = 10000 })
	resp, _, err := gw.post("/svc/v1/messages/count_tokens", gw.Key, body)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // 6 KB of 10 KB
	resp, _, err = gw.post("/svc/v1/messages/count_tokens", gw.Key, body)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusTooManyRequests) // 6 KB more do not fit

	gw.Server.Reload(Options{Router: gw.Server.current().router, FreeBytesPerMinute: -1})
	for range 20 {
		resp, _, err = gw.post("/svc/v1/messages/count_tokens", gw.Key, body)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusOK) // unlimited
	}
}

func TestRateLimit_TokensPerMinutePerKey(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock)) // no default limit
	tpm := int64(20)
	_, err := gw.Store.UpdateKeyLimits(ctx, gw.KeyID, func(l *store.KeyLimits) { l.TPM = &tpm })
	is.NoErr(err) // this key alone: 20 tokens a minute
	other, _ := gw.newKey(t, "acme", "")

	resp, _, err := gw.post("/svc/v1/messages", gw.Key, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // a full bucket admits the call
	resp, out, err := gw.post("/svc/v1/messages", gw.Key, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusTooManyRequests) // its input and output used the bucket up
	is.True(strings.Contains(string(out), "tokens per minute"))
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	is.NoErr(err)
	is.True(wait >= 1 && wait <= 60) // until the bucket holds the estimate
	resp, _, err = gw.post("/svc/v1/messages", other, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // other keys are not limited

	clock.Set(clock.Now().Add(time.Duration(wait) * time.Second))
	resp, _, err = gw.post("/svc/v1/messages", gw.Key, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // refilled after Retry-After
}

// A call refused for want of money gives its input back to the key's
// tokens per minute: a key with a tight TPM and no balance keeps getting
// the 402 that says why, never a 429 for tokens it never used.
func TestRateLimit_A402GivesItsInputBack(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock))
	key, id := gw.newKey(t, "broke", "") // no balance
	// capped16's prompt, "hi" in one message, is 5 tokens: a minute's
	// worth is one call's input.
	tpm := int64(5)
	_, err := gw.Store.UpdateKeyLimits(ctx, id, func(l *store.KeyLimits) { l.TPM = &tpm })
	is.NoErr(err)
	for range 3 {
		resp, _, err := gw.post("/svc/v1/messages", key, capped16)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusPaymentRequired) // every time: the 402 gave its 5 tokens back
	}
}

func TestRequestBounds_400InTheSurfaceEnvelope(t *testing.T) {
	gw := newTestGateway(t, func(o *Options) {
		o.Bounds = Bounds{MaxMessages: 3, MaxParts: 2, MaxTools: 1, MaxSchemaBytes: 64}
	})
	rep := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }
	schema := `{"type":"object","description":"` + strings.Repeat("x", 100) + `"}`
	cases := []struct {
		surface, path, name, body, want string
	}{
		{"chat", "/svc/v1/chat/completions", "messages",
			`{"model":"m","messages":[` + rep(`{"role":"user","content":"hi"}`, 4) + `]}`, "4 messages; the limit is 3"},
		{"chat", "/svc/v1/chat/completions", "parts",
			`{"model":"m","messages":[{"role":"user","content":[` + rep(`{"type":"text","text":"hi"}`, 3) + `]}]}`, "3 content parts"},
		{"chat", "/svc/v1/chat/completions", "tools",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + rep(`{"type":"function","function":{"name":"f"}}`, 2) + `]}`, "2 tools; the limit is 1"},
		{"chat", "/svc/v1/chat/completions", "schema",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + schema + `}}}`, "the limit is 64 bytes"},
		{"messages", "/svc/v1/messages", "messages",
			`{"model":"m","max_tokens":16,"messages":[` + rep(`{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}`, 2) + `,{"role":"user","content":"hi"}]}`, "5 messages; the limit is 3"},
		{"messages", "/svc/v1/messages", "parts",
			`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[` + rep(`{"type":"text","text":"hi"}`, 3) + `]}]}`, "3 content parts"},
		{"messages", "/svc/v1/messages", "tools schema",
			`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":` + schema + `}]}`, "the limit is 64 bytes"},
		{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", "contents",
			`{"contents":[` + rep(`{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"yo"}]}`, 2) + `,{"role":"user","parts":[{"text":"hi"}]}]}`, "5 messages; the limit is 3"},
		{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", "parts",
			`{"contents":[{"role":"user","parts":[` + rep(`{"text":"hi"}`, 3) + `]}]}`, "3 content parts"},
		{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", "tools",
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f"},{"name":"g"}]}]}`, "2 tools; the limit is 1"},
		// Consecutive turns of one role are merged into one, so the bound
		// is reported in the caller's terms: its messages, not our turn.
		{"messages", "/svc/v1/messages", "consecutive same-role messages",
			`{"model":"m","max_tokens":16,"messages":[` + rep(`{"role":"user","content":"hi"}`, 3) + `]}`,
			"3 consecutive messages of one role hold 3 content parts between them; consecutive messages of one role count as one turn, and the limit is 2 content parts per turn"},
		{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", "consecutive same-role contents",
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},` + rep(`{"role":"model","parts":[{"text":"yo"}]}`, 3) + `]}`,
			"3 consecutive contents of one role hold 3 content parts"},
		{"gencontent", "/svc/v1beta/models/gemini-2.5-flash:generateContent", "consecutive user contents",
			`{"contents":[` + rep(`{"role":"user","parts":[{"text":"hi"}]}`, 3) + `]}`,
			"3 consecutive contents of one role hold 3 content parts"},
		{"chat", "/svc/v1/chat/completions", "consecutive tool messages",
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[` +
				rep(`{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`, 1) + `]},` +
				rep(`{"role":"tool","tool_call_id":"c","content":"r"}`, 3) + `]}`,
			"3 consecutive messages of one role hold 3 content parts"},
	}
	for _, tc := range cases {
		t.Run(tc.surface+" "+tc.name, func(t *testing.T) {
			is := is.New(t)
			resp, out, err := gw.post(tc.path, gw.Key, tc.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusBadRequest) // a bound, not a size: 400
			surface, _ := envelopeKind(t, out)
			is.Equal(surface, tc.surface) // native envelope
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("message does not name the bound %q: %s", tc.want, out)
			}
		})
	}
}

// slow is the fixture behind a gate: Complete waits until the gate opens.
type slow struct {
	fx      *fixture.Backend
	started chan struct{}
	gate    chan struct{}
}

func (s slow) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	s.started <- struct{}{}
	<-s.gate
	return s.fx.Complete(ctx, req)
}

func (s slow) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	return s.fx.Stream(ctx, req)
}

func TestServer_WaitWaitsForHandlersToRecord(t *testing.T) {
	is := is.New(t)
	b := slow{fx: fixture.New(fixture.Options{}), started: make(chan struct{}, 1), gate: make(chan struct{})}
	gw := newTestGateway(t, withBackend(b))
	go func() { _, _, _ = gw.post("/svc/v1/messages", gw.Key, capped16) }()
	<-b.started

	waited := make(chan struct{})
	go func() { gw.Server.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a call was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(b.gate)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the call ended")
	}
	acct := gw.account(t, gw.Key)
	rows, _ := gw.ledgerTotals(t, acct.ID)
	is.Equal(rows, int64(1)) // recorded before Wait returned
}
