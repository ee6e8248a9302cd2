//go:build bench

// Command dashboard seeds a ledger at scale and measures what the dashboard
// page asks of it: the account endpoints it calls at sign-in and as it is
// used (issue 17: the listing's p99 under 50 ms, the page interactive with
// 30 days charted under 300 ms, on a ten-million-call database).
//
//	go -C bench run -tags bench ./dashboard seed -db /tmp/big.db -calls 10000000
//	go -C bench run -tags bench ./dashboard measure -db /tmp/big.db
//	SVCGW_DASHBOARD_BENCH_DB=/tmp/big.db go test -run '^$' -bench Dashboard_SignIn ./server
//
// seed records generations through the store's own ledger writer (so every
// table it keeps, roll-ups included, is as a live gateway would leave it),
// spread over -days days, for one account ("bench" by default) with
// several keys, applications and request types, plus -other-accounts
// accounts sharing the file. measure serves the database with svcgw's real
// handler on loopback and times each request the page makes, sequentially,
// reporting p50, p99 and max per request kind.
//
// Like bench/svcgwprof it imports svcgw (server and store); it is in the
// bench module (bench/go.mod), so go list ./... and the architecture test
// never see it.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/server"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
	_ "modernc.org/sqlite" // database/sql driver, for the deep cursors
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboard seed|measure [flags] (-h for each)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "seed":
		err = seed(os.Args[2:])
	case "measure":
		err = measure(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want seed or measure", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	db := fs.String("db", "", "database file to create or extend (required)")
	calls := fs.Int("calls", 1_000_000, "generations to record for the account")
	days := fs.Int("days", 90, "spread them over this many UTC days up to now")
	account := fs.String("account", "bench", "the account's name")
	keys := fs.Int("keys", 4, "API keys of the account")
	apps := fs.Int("apps", 12, "application labels")
	others := fs.Int("other-accounts", 3, "other accounts, each given a tenth of -calls")
	fs.Parse(args)
	if *db == "" {
		return fmt.Errorf("seed: -db is required")
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, *db, store.Options{BatchSize: 4096, QueueSize: 65536, BatchInterval: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	defer st.Close()

	start := time.Now()
	rng := rand.New(rand.NewPCG(17, 17))
	record := func(name string, n int) error {
		acct, _, err := st.EnsureAccount(ctx, name)
		if err != nil {
			return err
		}
		if _, err := st.AddCredits(ctx, acct.ID, *apd.New(1_000_000, 0), "bench seed"); err != nil {
			return err
		}
		var ids []string
		for i := range *keys {
			_, k, err := st.CreateKey(ctx, acct.ID, fmt.Sprintf("bench-%d", i))
			if err != nil {
				return err
			}
			ids = append(ids, k.ID)
		}
		now := time.Now().UTC()
		span := time.Duration(*days) * 24 * time.Hour
		surfaces := []string{"chat", "messages", "gencontent", "responses"}
		for i := range n {
			// Oldest first, as a ledger fills.
			at := now.Add(-span + time.Duration(float64(span)*float64(i)/float64(n)))
			typ := llm.RequestTypes[rng.IntN(len(llm.RequestTypes))]
			in, out := 50+rng.IntN(4000), 10+rng.IntN(1500)
			st.RecordGeneration(store.Generation{
				ID: llm.NewID("chatcmpl-", 24), AccountID: acct.ID, KeyID: ids[rng.IntN(len(ids))],
				Application: fmt.Sprintf("app-%02d", rng.IntN(*apps)), Surface: surfaces[rng.IntN(len(surfaces))],
				Model: "svc-fusion", RequestType: string(typ), Tier: "medium", Streamed: rng.IntN(2) == 0,
				FinishReason: "stop", PromptTokens: in, CompletionTokens: out,
				Cost:      money.Micros(in*2 + out*10),
				LatencyMS: int64(100 + rng.IntN(900)), GenerationTimeMS: int64(200 + rng.IntN(4000)),
				CreatedAt: at,
			})
			if (i+1)%1_000_000 == 0 {
				fmt.Fprintf(os.Stderr, "%s: %d of %d, %s\n", name, i+1, n, time.Since(start).Round(time.Second))
			}
		}
		return st.Sync(ctx)
	}
	if err := record(*account, *calls); err != nil {
		return err
	}
	for i := range *others {
		if err := record(fmt.Sprintf("%s-other-%d", *account, i), *calls/10); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "seeded %s in %s\n", *db, time.Since(start).Round(time.Second))
	return nil
}

// valueCount is a value of an axis of the usage report and its calls.
type valueCount struct {
	value string
	n     int64
}

// valueCounts are the values of axis (application or request_type) of the
// account's generations of all time, the most common first, read from the
// usage report.
func valueCounts(get func(string) ([]byte, time.Duration, error), axis string) ([]valueCount, error) {
	body, _, err := get("/svc/v1/usage?group_by=" + axis)
	if err != nil {
		return nil, err
	}
	var r struct {
		Data []struct {
			Bucket   string
			Requests int64
		}
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("usage by %s: %w", axis, err)
	}
	var out []valueCount
	for _, d := range r.Data {
		if d.Requests > 0 {
			out = append(out, valueCount{d.Bucket, d.Requests})
		}
	}
	slices.SortFunc(out, func(a, b valueCount) int { return cmp.Compare(b.n, a.n) })
	return out, nil
}

// deepCursor is the id of the generation of the account whose column
// (application or request_type) is v.value with a hundredth of those
// generations older than it: a listing from there reads the far end of
// the value's history. It is read from the database file directly, as no
// endpoint lists oldest first.
func deepCursor(ctx context.Context, path string, account int64, column string, v valueCount) (string, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var id string
	err = db.QueryRowContext(ctx, `SELECT id FROM generations WHERE account_id = ? AND `+column+` = ?
		ORDER BY created_at, rowid LIMIT 1 OFFSET ?`, account, v.value, v.n/100).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("deep cursor of %s %s: %w", column, v.value, err)
	}
	return id, nil
}

func measure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ExitOnError)
	db := fs.String("db", "", "database file seeded by seed (required)")
	account := fs.String("account", "bench", "the account whose page is measured")
	n := fs.Int("n", 200, "requests of each kind")
	fs.Parse(args)
	if *db == "" {
		return fmt.Errorf("measure: -db is required")
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, *db, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	acct, err := st.AccountByName(ctx, *account)
	if err != nil {
		return err
	}
	secret, k, err := st.CreateKey(ctx, acct.ID, "dashboard-measure")
	if err != nil {
		return err
	}
	defer st.RevokeKey(ctx, k.ID)
	fx := fixture.New(fixture.Options{})
	srv := server.New(server.Options{
		Logger: slog.New(slog.DiscardHandler),
		Store:  st,
		Router: upstream.NewRouter([]upstream.Candidate{{Name: "fixture", Backend: fx, Limits: fx.Limits()}}),
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()

	// get times one request. A key's account requests have a budget of
	// the gateway's time (100 ms a second, surfaces/account): back to back,
	// as here, they run past it, so a 429 is waited out as Retry-After-Ms
	// says and the request sent again; only the answered one is timed, and
	// the waits are counted.
	var waits int
	get := func(path string) ([]byte, time.Duration, error) {
		for {
			req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, 0, err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			d := time.Since(t0)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				ms, perr := strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
				if perr != nil {
					return nil, 0, fmt.Errorf("GET %s: 429 without Retry-After-Ms: %s", path, body)
				}
				waits++
				time.Sleep(time.Duration(ms) * time.Millisecond)
				continue
			}
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
			}
			return body, d, err
		}
	}

	today := time.Now().UTC()
	from := today.AddDate(0, 0, -29).Format(time.DateOnly)
	to := today.Format(time.DateOnly)
	usage := func(groupBy string) string {
		return "/svc/v1/usage?" + url.Values{"group_by": {groupBy}, "start_date": {from}, "end_date": {to}}.Encode()
	}
	kinds := []struct {
		name string
		path func(i int, last []byte) string
	}{
		{"credits", func(int, []byte) string { return "/svc/v1/credits" }},
		{"usage, 30 days by day", func(int, []byte) string { return usage("day") }},
		{"usage, 30 days by day × request type", func(int, []byte) string { return usage("day,request_type") }},
		{"usage, 30 days by day × application", func(int, []byte) string { return usage("day,application") }},
		{"generations, first page of 25", func(int, []byte) string { return "/svc/v1/generations?limit=25" }},
		{"generations, next pages of 25 (cursor)", func(i int, last []byte) string {
			var l struct {
				LastID  string `json:"last_id"`
				HasMore bool   `json:"has_more"`
			}
			if i == 0 || json.Unmarshal(last, &l) != nil || !l.HasMore {
				return "/svc/v1/generations?limit=25"
			}
			return "/svc/v1/generations?limit=25&before=" + url.QueryEscape(l.LastID)
		}},
		{"generations, 50 filtered by request type (each in turn)", func(i int, _ []byte) string {
			return "/svc/v1/generations?limit=50&request_type=" + string(llm.RequestTypes[i%len(llm.RequestTypes)])
		}},
	}
	if err := st.Sync(ctx); err != nil {
		return err
	}
	// The filtered listings: the account's most common and rarest values
	// (by the usage report of all time), one it never used, and deep
	// cursors, the oldest 1% of a value's generations.
	apps, err := valueCounts(get, "application")
	if err != nil {
		return err
	}
	types, err := valueCounts(get, "request_type")
	if err != nil {
		return err
	}
	if len(apps) == 0 || len(types) == 0 {
		return fmt.Errorf("measure: account %q has no generations", *account)
	}
	const absentApp = "absent.example.invalid"
	commonApp, rareApp := apps[0], apps[len(apps)-1]
	commonType, rareType := types[0], types[len(types)-1]
	deepApp, err := deepCursor(ctx, *db, acct.ID, "application", commonApp)
	if err != nil {
		return err
	}
	deepType, err := deepCursor(ctx, *db, acct.ID, "request_type", rareType)
	if err != nil {
		return err
	}
	list := func(name string, q url.Values) {
		q.Set("limit", "50")
		kinds = append(kinds, struct {
			name string
			path func(i int, last []byte) string
		}{name, func(int, []byte) string { return "/svc/v1/generations?" + q.Encode() }})
	}
	list(fmt.Sprintf("50 of the most common application (%s, %d calls)", commonApp.value, commonApp.n),
		url.Values{"application": {commonApp.value}})
	list(fmt.Sprintf("50 of the rarest application (%s, %d calls)", rareApp.value, rareApp.n),
		url.Values{"application": {rareApp.value}})
	list(fmt.Sprintf("50 of an absent application (%s)", absentApp), url.Values{"application": {absentApp}})
	list(fmt.Sprintf("50 of the rarest request type (%s, %d calls)", rareType.value, rareType.n),
		url.Values{"request_type": {rareType.value}})
	list(fmt.Sprintf("50 of both: the most common application, the rarest type (%s, %s)", commonApp.value, rareType.value),
		url.Values{"application": {commonApp.value}, "request_type": {rareType.value}})
	list(fmt.Sprintf("50 of both: the rarest application, the most common type (%s, %s)", rareApp.value, commonType.value),
		url.Values{"application": {rareApp.value}, "request_type": {commonType.value}})
	list(fmt.Sprintf("50 of the most common application, from its oldest 1%% (%s)", deepApp),
		url.Values{"application": {commonApp.value}, "before": {deepApp}})
	list(fmt.Sprintf("50 of the rarest request type, from its oldest 1%% (%s)", deepType),
		url.Values{"request_type": {rareType.value}, "before": {deepType}})
	var rows int64
	body, _, err := get(usage("day"))
	if err != nil {
		return err
	}
	var u struct{ Total struct{ Requests int64 } }
	json.Unmarshal(body, &u)
	rows = u.Total.Requests

	fmt.Printf("dashboard requests on %s, account %q (%d calls in the last 30 days); %d sequential requests of each kind\n\n", *db, *account, rows, *n)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tp50 (ms)\tp99 (ms)\tmax (ms)\t")
	for _, k := range kinds {
		var times []time.Duration
		var last []byte
		for i := range *n {
			body, d, err := get(k.path(i, last))
			if err != nil {
				return err
			}
			last = body
			times = append(times, d)
		}
		slices.Sort(times)
		q := func(p float64) string {
			return fmt.Sprintf("%.2f", float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds())/1000)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", strings.TrimSpace(k.name), q(0.5), q(0.99), q(1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("\n%d requests waited out a 429 of the key's account-request budget first (not timed)\n", waits)
	return nil
}
