package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/surfaces/account"
)

// keptEnv is a gateway whose usage answers are kept across commits
// (cached), and a second server on the same store that cannot keep them
// (uncached: store.DB alone has no usage feed), so runs its query for every
// read: what a kept answer must equal byte for byte.
type keptEnv struct {
	cached, uncached *testGateway
	clock            *testClock
	fail             atomic.Bool // fail every ledger commit before its COMMIT
	keys             []string    // acme's keys, the gateway's first
	other            string      // a key of another account
}

func newKeptEnv(t *testing.T) *keptEnv {
	t.Helper()
	e := &keptEnv{clock: &testClock{t: time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)}}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{
		Now: e.clock.Now, RetryInterval: 20 * time.Millisecond,
		CommitHook: func() error {
			if e.fail.Load() {
				return fmt.Errorf("injected commit failure")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// No budgets or rests: these reads are the test's, not a flood.
	lim := account.Limits{Concurrent: 16, Share: 1, Time: time.Hour, Burst: time.Hour}
	e.cached = newTestGateway(t, withStore(st), withClock(e.clock), func(o *Options) { o.AccountLimits = lim })
	plain := New(Options{Logger: e.cached.Server.log, Store: struct{ store.DB }{st}, Now: e.clock.Now,
		Router: e.cached.Server.current().router, AccountLimits: lim})
	hs := httptest.NewServer(plain)
	t.Cleanup(hs.Close)
	e.uncached = &testGateway{URL: hs.URL, Key: e.cached.Key, Store: st}
	e.keys = []string{e.cached.Key}
	e.other, _ = e.cached.newKey(t, "beta", "10")
	return e
}

// The bodies of the calls: their request types differ (flash, json, code),
// and some stream.
var keptCalls = []string{
	floodChat,
	`{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16,"stream":true}`,
	`{"model":"svc-fusion","messages":[{"role":"user","content":"List three colours."}],"response_format":{"type":"json_object"},"max_tokens":32}`,
	"{\"model\":\"svc-fusion\",\"messages\":[{\"role\":\"user\",\"content\":\"Fix this:\\n```go\\nfunc main() { fmt.Println(1) }\\n```\"}],\"max_tokens\":24}",
	`{"model":"svc-fusion","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`,
}

// call makes one call of body with key, as application app ("" for none),
// and returns its status (a refused call records nothing).
func (e *keptEnv) call(t *testing.T, key, app, body string) int {
	t.Helper()
	resp, _ := e.cached.do(t, http.MethodPost, "/svc/v1/chat/completions", body,
		"Authorization", "Bearer "+key, "X-Title", app)
	return resp.StatusCode
}

// recovered waits until the ledger has committed what it failed to.
func (e *keptEnv) recovered(t *testing.T) {
	t.Helper()
	for i := 0; e.cached.Store.Sync(context.Background()) != nil; i++ {
		if i == 100 {
			t.Fatal("the ledger did not recover")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// usagePaths are every grouping over ranges around the test's days: all
// time, from a day, to a day, between two days, and a range with no calls.
func usagePaths() []string {
	var paths []string
	for _, g := range []string{"day", "request_type", "application", "api_key", "day,request_type", "day,application", "day,api_key"} {
		for _, rg := range []string{"", "&start_date=2025-03-11", "&end_date=2025-03-11", "&start_date=2025-03-11&end_date=2025-03-13",
			"&start_date=2025-03-12T00:00:00Z&end_date=2025-03-14T00:00:00Z", "&start_date=2020-01-01&end_date=2020-01-31"} {
			paths = append(paths, "/svc/v1/usage?group_by="+g+rg)
		}
	}
	return paths
}

// check reads path with key from both servers and fails unless their
// answers are the same bytes.
func (e *keptEnv) check(t *testing.T, key, path string) {
	t.Helper()
	status, _, got := getWith(t, e.cached, key, path)
	if status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", path, status, got)
	}
	_, _, want := getWith(t, e.uncached, key, path)
	if string(got) != string(want) {
		t.Fatalf("%s: kept answer\n%s\ndiffers from the query's\n%s", path, got, want)
	}
}

// After random mixes of calls (new keys, new applications, streamed ones,
// refused ones, several days) and ledger commits, some of them failed and
// retried, every kept answer, of every grouping and range, is byte for
// byte the answer its query gives.
func TestAccountReads_KeptAnswersStayExact(t *testing.T) {
	e := newKeptEnv(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	paths := usagePaths()
	apps := []string{"", "app-0"}
	for round := range 40 {
		switch rng.IntN(6) {
		case 0:
			s, _ := e.cached.newKey(t, "acme", "")
			e.keys = append(e.keys, s)
		case 1:
			apps = append(apps, fmt.Sprint("app-", len(apps)))
		case 2:
			e.clock.Set(e.clock.Now().Add(time.Duration(rng.IntN(20)) * time.Hour))
		case 3:
			// A commit that fails (rolled back) and is retried: its rows
			// count once, when the retry commits.
			e.fail.Store(true)
			e.call(t, e.keys[rng.IntN(len(e.keys))], apps[rng.IntN(len(apps))], keptCalls[0])
			time.Sleep(30 * time.Millisecond)
			e.fail.Store(false)
			e.recovered(t)
		case 4:
			// Refused before any upstream: recorded nothing.
			e.call(t, e.keys[0], "", `{"model":"svc-fusion","messages":[{"role":"user","content":"hi"}],"max_tokens":100000000}`)
		}
		for range 1 + rng.IntN(6) {
			key := e.keys[rng.IntN(len(e.keys))]
			if rng.IntN(5) == 0 {
				key = e.other
			}
			if status := e.call(t, key, apps[rng.IntN(len(apps))], keptCalls[rng.IntN(len(keptCalls))]); status != http.StatusOK {
				t.Fatalf("round %d: call: status %d", round, status)
			}
		}
		// Some answers each round, all of them every fifth: the kept ones
		// then have several commits to fold in at once.
		if round%5 == 4 {
			for _, p := range paths {
				e.check(t, e.keys[0], p)
			}
			continue
		}
		for range 8 {
			e.check(t, e.keys[0], paths[rng.IntN(len(paths))])
		}
		e.check(t, e.other, paths[rng.IntN(len(paths))])
	}
	for _, p := range paths {
		e.check(t, e.keys[0], p)
		e.check(t, e.other, p)
	}
}

// While calls are being committed, concurrent readers of kept answers
// never see one older than their own calls (their Sync), and once the
// calls stop every kept answer is the query's.
func TestAccountReads_KeptAnswersUnderConcurrentCommits(t *testing.T) {
	is := is.New(t)
	e := newKeptEnv(t)
	for range 3 {
		s, _ := e.cached.newKey(t, "acme", "")
		e.keys = append(e.keys, s)
	}
	paths := usagePaths()
	var (
		made atomic.Int64 // acme's calls answered
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for i := range 2 { // callers
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				resp, _, err := e.cached.post("/svc/v1/chat/completions", e.keys[(i+n)%len(e.keys)], keptCalls[n%len(keptCalls)])
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("call: %v %v", err, resp)
					return
				}
				made.Add(1)
				if n%7 == 0 {
					e.clock.Set(e.clock.Now().Add(3 * time.Hour))
				}
			}
		})
	}
	var reads atomic.Int64
	for i := range 4 { // readers
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				before := made.Load()
				path := paths[(i*11+n)%len(paths)]
				if n%3 == 0 {
					path = "/svc/v1/usage?group_by=request_type"
				}
				req, _ := http.NewRequest(http.MethodGet, e.cached.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+e.keys[i%len(e.keys)])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var u struct {
					Total struct {
						Requests int64 `json:"requests"`
					} `json:"total"`
				}
				err = json.NewDecoder(resp.Body).Decode(&u)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("%s: %d %v", path, resp.StatusCode, err)
					return
				}
				if path == "/svc/v1/usage?group_by=request_type" && u.Total.Requests < before {
					t.Errorf("an answer of %d requests after %d calls were answered", u.Total.Requests, before)
				}
				reads.Add(1)
			}
		})
	}
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d calls, %d reads", made.Load(), reads.Load())
	is.True(made.Load() > 0)
	is.True(reads.Load() > 0)
	for _, p := range paths {
		e.check(t, e.keys[0], p)
	}
}
