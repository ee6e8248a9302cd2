package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/surfaces/account"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// floodEnv is a gateway on a SQLite ledger of one account holding calls
// spread over 90 days, keys and applications, as bench/seed writes them
// (smaller), for the account-read flood benchmarks.
type floodEnv struct {
	st      *sqlite.Store
	secrets []string // the flood's keys, one per client
	keyIDs  []string
}

func newFloodEnv(b *testing.B, calls int) *floodEnv {
	b.Helper()
	e := &floodEnv{}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "svcgw.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e.st = st
	a, _, err := st.EnsureAccount(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		s, k, err := st.CreateKey(ctx, a.ID, fmt.Sprint("k", i))
		if err != nil {
			b.Fatal(err)
		}
		if i < 8 {
			e.secrets = append(e.secrets, s)
		}
		e.keyIDs = append(e.keyIDs, k.ID)
	}
	start := time.Now().UTC().AddDate(0, 0, -90)
	types := []string{"flash", "pro", "code", "long", "reason", "json", "vision", "document"}
	for i := range calls {
		st.RecordGeneration(store.Generation{
			ID: fmt.Sprintf("gen-%d", i), AccountID: a.ID, KeyID: e.keyIDs[i%len(e.keyIDs)],
			Application: fmt.Sprintf("app-%02d", i%20), Surface: "chat", Model: "m", RequestType: types[i%len(types)],
			PromptTokens: 100 + i%50, CompletionTokens: 20 + i%7, Cost: money.Micros(100 + i%900),
			CreatedAt: start.Add(time.Duration(i) * 90 * 24 * time.Hour / time.Duration(calls)),
		})
	}
	if err := st.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	return e
}

// server is a gateway on the environment's store; cached false hides the
// store's usage feed, so that the account reads run a query each, as
// before the cache.
func (e *floodEnv) server(cached bool, lim account.Limits) *Server {
	var st store.DB = e.st
	if !cached {
		st = struct{ store.DB }{e.st}
	}
	fx := fixture.New(fixture.Options{})
	return New(Options{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Store:         st,
		Router:        upstream.NewRouter([]upstream.Candidate{{Name: "fixture", Backend: fx, Limits: fx.Limits()}}),
		AccountLimits: lim,
	})
}

// BenchmarkAccountFlood_UsageAllTime is the flood of bench/ledger.sh
// without the network: parallel GET /svc/v1/usage over all time, the four
// groupings in turn, through the whole handler (authentication included),
// by 8 clients with a key each, with the query run for each read (uncached) and with the answers kept
// (cached). Run it with -cpu 1 to measure the CPU a read
// costs svcgw pinned to one core: ns/op is then CPU per read. The budget
// and the turns' rest are off, so that this is the read's own cost.
func BenchmarkAccountFlood_UsageAllTime(b *testing.B) {
	e := newFloodEnv(b, 50_000)
	groups := []string{"day", "request_type", "application", "api_key"}
	for _, cached := range []bool{false, true} {
		b.Run(map[bool]string{false: "uncached", true: "cached"}[cached], func(b *testing.B) {
			srv := e.server(cached, account.Limits{Concurrent: 64, Share: 1, Time: time.Hour, Burst: time.Hour})
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			var clients atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				secret := e.secrets[clients.Add(1)%8]
				for pb.Next() {
					i := n.Add(1)
					req := httptest.NewRequest(http.MethodGet, "/svc/v1/usage?group_by="+groups[i%4], nil)
					req.Header.Set("Authorization", "Bearer "+secret)
					rec := httptest.NewRecorder()
					srv.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
			})
		})
	}
}

// BenchmarkAccountFlood_UsageAfterCommit is what the flood of
// BenchmarkAccountFlood_UsageAllTime costs after each ledger commit: one
// op is the four groupings over all time read once each right after a
// commit of 20 calls (of 20 keys, 10 applications, today), as at 1,000
// calls/s of many keys, where the ledger commits about 50 times a second.
// The calls and their commit are not timed: only the reads that follow.
// With the answers dropped at every commit each read runs its query; kept
// across commits, each adds the commit's sums to its answer.
func BenchmarkAccountFlood_UsageAfterCommit(b *testing.B) {
	e := newFloodEnv(b, 50_000)
	srv := e.server(true, account.Limits{Concurrent: 64, Share: 1, Time: time.Hour, Burst: time.Hour})
	groups := []string{"day", "request_type", "application", "api_key"}
	acct := e.st
	ctx := context.Background()
	k, err := acct.Authenticate(ctx, e.secrets[0])
	if err != nil {
		b.Fatal(err)
	}
	read := func(g string) {
		req := httptest.NewRequest(http.MethodGet, "/svc/v1/usage?group_by="+g, nil)
		req.Header.Set("Authorization", "Bearer "+e.secrets[0])
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	for _, g := range groups { // the answers, once
		read(g)
	}
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for range 20 {
			n++
			acct.RecordGeneration(store.Generation{
				ID: fmt.Sprintf("after-%d", n), AccountID: k.AccountID, KeyID: e.keyIDs[n%len(e.keyIDs)],
				Application: fmt.Sprintf("app-%02d", n%10), Surface: "chat", Model: "m", RequestType: "flash",
				PromptTokens: 100, CompletionTokens: 20, Cost: money.Micros(100 + n%900),
			})
		}
		if err := acct.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, g := range groups {
			read(g)
		}
	}
}
