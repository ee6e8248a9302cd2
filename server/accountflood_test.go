package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/surfaces/account"
)

// countingStore is the SQLite store with its usage queries counted, and
// held while gate is set (until it is closed).
type countingStore struct {
	*sqlite.Store
	queries atomic.Int64
	entered chan struct{} // one send per query, when set
	gate    chan struct{}
	delay   time.Duration
}

func (c *countingStore) hold() {
	c.queries.Add(1)
	if c.entered != nil {
		c.entered <- struct{}{}
	}
	if c.gate != nil {
		<-c.gate
	}
	time.Sleep(c.delay)
}

func (c *countingStore) Usage(ctx context.Context, accountID int64, q store.UsageQuery) ([]store.Bucket, error) {
	c.hold()
	return c.Store.Usage(ctx, accountID, q)
}

func (c *countingStore) UsageByDay(ctx context.Context, accountID int64, q store.UsageQuery) ([]store.DayBucket, error) {
	c.hold()
	return c.Store.UsageByDay(ctx, accountID, q)
}

// newCountingGateway is a test gateway on a countingStore.
func newCountingGateway(t *testing.T, lim account.Limits, adjust func(*countingStore)) (*testGateway, *countingStore) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	if adjust != nil {
		adjust(cs)
	}
	gw := newTestGateway(t, withStore(cs), func(o *Options) { o.AccountLimits = lim })
	return gw, cs
}

const floodChat = `{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}`

// getWith GETs path with secret's key and returns the status, the headers and the body.
func getWith(t *testing.T, gw *testGateway, secret, path string) (int, http.Header, []byte) {
	t.Helper()
	resp, body := gw.do(t, http.MethodGet, path, "", "Authorization", "Bearer "+secret)
	return resp.StatusCode, resp.Header, body
}

// A usage read is never staler than the ledger: a call made before it is
// in it (the handler waits for the ledger's commit, as without the cache),
// and a kept answer is brought up to date with each commit's sums instead
// of being read again: one query per question, however many commits.
func TestAccountReads_CacheIsNeverStalerThanTheLedger(t *testing.T) {
	is := is.New(t)
	gw, cs := newCountingGateway(t, account.Limits{}, nil)
	requests := func() int64 {
		_, _, body := getWith(t, gw, gw.Key, "/svc/v1/usage?group_by=request_type")
		var u struct {
			Total struct {
				Requests int64 `json:"requests"`
			} `json:"total"`
		}
		is.NoErr(json.Unmarshal(body, &u))
		return u.Total.Requests
	}
	is.Equal(requests(), int64(0))
	for i := 1; i <= 5; i++ {
		resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", floodChat)
		is.Equal(resp.StatusCode, http.StatusOK)
		// No Sync here: the read itself makes the call visible.
		is.Equal(requests(), int64(i))
	}
	is.Equal(cs.queries.Load(), int64(1)) // the commits were added to the first answer

	for range 10 {
		is.Equal(requests(), int64(5))
	}
	is.Equal(cs.queries.Load(), int64(1))
	// Another grouping or range is another query.
	status, _, _ := getWith(t, gw, gw.Key, "/svc/v1/usage?group_by=day")
	is.Equal(status, http.StatusOK)
	status, _, _ = getWith(t, gw, gw.Key, "/svc/v1/usage?group_by=day,application")
	is.Equal(status, http.StatusOK)
	is.Equal(cs.queries.Load(), int64(3))
	// Another account's key has its own answer.
	other, _ := gw.newKey(t, "beta", "1")
	_, _, body := getWith(t, gw, other, "/svc/v1/usage?group_by=request_type")
	is.True(json.Valid(body))
	var u struct {
		Data []any `json:"data"`
	}
	is.NoErr(json.Unmarshal(body, &u))
	is.Equal(len(u.Data), 0)
	is.Equal(cs.queries.Load(), int64(4))
}

// Identical usage reads arriving together run one query: the others wait
// for its answer, and all get the same bytes.
func TestAccountReads_IdenticalConcurrentReadsShareOneQuery(t *testing.T) {
	is := is.New(t)
	const n = 8
	gw, cs := newCountingGateway(t, account.Limits{Concurrent: n}, func(c *countingStore) {
		c.entered = make(chan struct{}, n)
		c.gate = make(chan struct{})
	})
	resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", floodChat)
	is.Equal(resp.StatusCode, http.StatusOK)
	secrets := []string{gw.Key}
	for len(secrets) < n { // keys of the same account: the answer is the account's
		s, _ := gw.newKey(t, "acme", "")
		secrets = append(secrets, s)
	}
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i, s := range secrets {
		wg.Go(func() {
			status, _, body := getWith(t, gw, s, "/svc/v1/usage?group_by=application")
			if status != http.StatusOK {
				t.Errorf("status %d: %s", status, body)
			}
			bodies[i] = body
		})
	}
	<-cs.entered // the first query runs, and is held
	time.Sleep(200 * time.Millisecond)
	close(cs.gate)
	wg.Wait()
	is.Equal(cs.queries.Load(), int64(1))
	for _, b := range bodies {
		is.Equal(string(b), string(bodies[0]))
	}
}

// The cached answers are the uncached handler's, byte for byte, for every
// grouping and range, after calls on several keys and applications.
func TestAccountReads_CachedAnswersMatchUncached(t *testing.T) {
	is := is.New(t)
	gw, _ := newCountingGateway(t, account.Limits{}, nil)
	second, _ := gw.newKey(t, "acme", "")
	for i := range 12 {
		secret := gw.Key
		if i%3 == 0 {
			secret = second
		}
		resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", floodChat,
			"Authorization", "Bearer "+secret, "X-Title", "app-"+strconv.Itoa(i%4))
		is.Equal(resp.StatusCode, http.StatusOK)
	}
	// The same store behind a server that cannot cache: store.DB alone
	// has no usage feed.
	plain := New(Options{Logger: gw.Server.log, Store: struct{ store.DB }{gw.Store}, Router: gw.Server.current().router})
	hs := httptest.NewServer(plain)
	t.Cleanup(hs.Close)
	uncached := &testGateway{URL: hs.URL, Key: gw.Key}
	today := time.Now().UTC().Format(time.DateOnly)
	for _, g := range []string{"day", "request_type", "application", "api_key", "day,request_type", "day,application", "day,api_key"} {
		for _, rg := range []string{"", "&start_date=" + today, "&end_date=" + today, "&start_date=2020-01-01&end_date=2020-01-31"} {
			path := "/svc/v1/usage?group_by=" + g + rg
			for range 2 { // the first read fills the cache, the second is served from it
				_, _, got := getWith(t, gw, gw.Key, path)
				_, _, want := getWith(t, uncached, gw.Key, path)
				is.Equal(string(got), string(want))
			}
		}
	}
}

// A key that floods the account endpoints runs out of its budget of
// account-request time and is refused with a 429 in the account endpoints'
// envelope (chat-completions'), with Retry-After; the account's other keys
// keep their own budgets, and the flooder's refills.
func TestAccountReads_BudgetRefusesAFlooderNotTheAccountsOtherKeys(t *testing.T) {
	is := is.New(t)
	gw, _ := newCountingGateway(t, account.Limits{Time: 20 * time.Millisecond, Burst: 50 * time.Millisecond}, func(c *countingStore) {
		c.delay = 5 * time.Millisecond // each usage query takes at least 5 ms
	})
	other, _ := gw.newKey(t, "acme", "")
	var (
		status int
		header http.Header
		body   []byte
	)
	for i := range 100 {
		// Each range is another query (no cached answer), as a flooder
		// defeating the cache would ask.
		status, header, body = getWith(t, gw, gw.Key, fmt.Sprintf("/svc/v1/usage?start_date=2020-01-%02d", i%28+1)+"&group_by=day&end_date=2020-02-01")
		if status != http.StatusOK {
			break
		}
	}
	is.Equal(status, http.StatusTooManyRequests)
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	is.NoErr(json.Unmarshal(body, &env))
	is.Equal(env.Error.Code, "rate_limit_exceeded")
	is.Equal(env.Error.Type, "requests")
	is.Equal(env.Error.Message, "This API key's account requests have taken more than 20ms a second of the gateway's time, "+
		"the most they may take (50ms at once); retry after the time Retry-After gives.")
	// Retry-After is when the key's budget is back above zero: what it
	// spent past it, refilled at 20 ms a second (a 5 ms query past it is
	// a quarter of a second), in whole seconds and in milliseconds.
	ms, err := strconv.Atoi(header.Get("Retry-After-Ms"))
	is.NoErr(err)
	is.True(ms > 0)
	is.Equal(header.Get("Retry-After"), strconv.Itoa((ms+999)/1000))

	// The account's other key is served, the flooder again once its budget
	// has refilled.
	status, _, _ = getWith(t, gw, other, "/svc/v1/usage")
	is.Equal(status, http.StatusOK)
	status, _, _ = getWith(t, gw, other, "/svc/v1/credits")
	is.Equal(status, http.StatusOK)
	time.Sleep(time.Duration(ms) * time.Millisecond)
	status, _, _ = getWith(t, gw, gw.Key, "/svc/v1/usage")
	is.Equal(status, http.StatusOK)
	// Feedback is not an account read: the requests per minute count it.
	resp, _ := gw.do(t, http.MethodPost, "/svc/v1/feedback", `{"id":"chatcmpl-none","rating":"up"}`)
	is.Equal(resp.StatusCode, http.StatusNotFound)
}
