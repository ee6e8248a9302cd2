package server

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store/sqlite"
	"github.com/svcgw/svcgw/surfaces/account"
	"github.com/svcgw/svcgw/surfaces/chat"
	"github.com/svcgw/svcgw/surfaces/gencontent"
	"github.com/svcgw/svcgw/surfaces/messages"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// mixBackend serves calls from a fast fixture, or from a slow one when the
// prompt says SLOW (so that callers can leave mid-stream); a prompt saying
// FAIL-EARLY fails before any event, one saying FAIL-MID after a few.
type mixBackend struct {
	fast, slow *fixture.Backend
}

func prompt(req *llm.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func (b mixBackend) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p := prompt(req)
	if strings.Contains(p, "FAIL-") {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}
	}
	if strings.Contains(p, "SLOW") {
		return b.slow.Complete(ctx, req)
	}
	return b.fast.Complete(ctx, req)
}

func (b mixBackend) Stream(ctx context.Context, req *llm.Request) (upstream.Stream, error) {
	p := prompt(req)
	switch {
	case strings.Contains(p, "FAIL-EARLY"):
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}
	case strings.Contains(p, "SLOW"):
		return b.slow.Stream(ctx, req)
	}
	s, err := b.fast.Stream(ctx, req)
	if err != nil || !strings.Contains(p, "FAIL-MID") {
		return s, err
	}
	return &failAfter{Stream: s, n: 3}, nil
}

// failAfter passes n events through and then fails.
type failAfter struct {
	upstream.Stream
	n   int
	err error
}

func (f *failAfter) Next() bool {
	if f.n == 0 {
		f.err = &llm.Error{Kind: llm.KindUpstream, Message: "the upstream model failed"}
		return false
	}
	f.n--
	return f.Stream.Next()
}

func (f *failAfter) Err() error {
	if f.err != nil {
		return f.err
	}
	return f.Stream.Err()
}

// TestLedger_RollupsReconcileAfterMixedCalls makes calls of every kind —
// four surfaces, streamed and not, cached, failed before and after their
// first event, left by their caller mid-stream — over several UTC days
// across a month's end, from two accounts, three keys and several
// applications, and then checks that every view of the ledger agrees to
// the micro-dollar and the token:
//
//   - /usage, in all four groupings over many ranges, equals the same sums
//     computed from the generations table itself;
//   - each account's /credits total_used equals the sum of the /generation
//     records of every call it was charged for, and its /usage total, and
//     balance = credits − total_used.
func TestLedger_RollupsReconcileAfterMixedCalls(t *testing.T) {
	is := is.New(t)
	clock := &testClock{t: time.Date(2025, 1, 30, 22, 0, 0, 0, time.UTC)}
	fast := fixture.New(fixture.Options{})
	slow := fixture.New(fixture.Options{TokensPerSecond: 20})
	gw := newTestGateway(t, withClock(clock), withBackend(mixBackend{fast: fast, slow: slow}))
	key2, _ := gw.newKey(t, "acme", "")
	other, _ := gw.newKey(t, "globex", "10")
	keys := []string{gw.Key, key2, other}

	longSystem := strings.Repeat("You are a careful assistant for a shipping company. ", 120) // cacheable
	type shape struct {
		name, path, body, idField string
		stream, cancel            bool
	}
	chatBody := func(text string, extra string) string {
		return `{"model":"svc-fusion","messages":[{"role":"user","content":"` + text + `"}]` + extra + `}`
	}
	shapes := []shape{
		{name: "chat", path: "/svc/v1/chat/completions", body: chatBody("Hello %d.", ""), idField: "id"},
		{name: "chat streamed", path: "/svc/v1/chat/completions", body: chatBody("Stream %d.", `,"stream":true,"stream_options":{"include_usage":true}`), stream: true},
		{name: "chat cached", path: "/svc/v1/chat/completions", idField: "id",
			body: `{"model":"svc-fusion","messages":[{"role":"system","content":"` + longSystem + `","cache_control":{"type":"ephemeral"}},{"role":"user","content":"Parcel %d?"}]}`},
		{name: "chat tools", path: "/svc/v1/chat/completions", idField: "id",
			body: `{"model":"svc-fusion","messages":[{"role":"user","content":"Weather %d?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`},
		{name: "chat reasoning", path: "/svc/v1/chat/completions", body: chatBody("Think %d.", `,"reasoning_effort":"high"`), idField: "id"},
		{name: "chat failed early", path: "/svc/v1/chat/completions", body: chatBody("FAIL-EARLY %d", "")},
		{name: "chat failed mid-stream", path: "/svc/v1/chat/completions", body: chatBody("FAIL-MID %d", `,"stream":true`), stream: true},
		{name: "chat left mid-stream", path: "/svc/v1/chat/completions", body: chatBody("SLOW tell me a long story %d", `,"stream":true`), stream: true, cancel: true},
		{name: "messages", path: "/svc/v1/messages", idField: "id",
			body: `{"model":"claude-x","max_tokens":256,"messages":[{"role":"user","content":"Hi %d"}]}`},
		{name: "generate content", path: "/svc/v1beta/models/gemini-flash:generateContent", idField: "responseId",
			body: `{"contents":[{"parts":[{"text":"Hi %d"}]}]}`},
		{name: "responses", path: "/svc/v1/responses", idField: "id", body: `{"model":"svc-fusion","input":"Hi %d"}`},
	}
	apps := [][2]string{{"X-Title", "Alpha"}, {"X-Title", "Beta"}, {"Referer", "https://gamma.example.org/x"}, {"", ""}}

	var (
		mu      sync.Mutex
		charged = map[string][]string{} // generation ids by key
	)
	r := rand.New(rand.NewPCG(11, 12))
	n := 0
	for day := range 5 { // Jan 30 – Feb 3
		var wg sync.WaitGroup
		for range 24 {
			n++
			sh := shapes[r.IntN(len(shapes))]
			key := keys[r.IntN(len(keys))]
			app := apps[r.IntN(len(apps))]
			body := strings.Replace(sh.body, "%d", fmt.Sprint(n), 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := callForID(gw, sh.path, key, body, sh.idField, sh.stream, sh.cancel, app)
				if err != nil {
					t.Errorf("%s: %v", sh.name, err)
					return
				}
				if id != "" {
					mu.Lock()
					charged[key] = append(charged[key], id)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		clock.Set(clock.Now().Add(24 * time.Hour))
		_ = day
	}
	gw.Server.Wait() // every handler has metered its call
	is.NoErr(gw.Store.Sync(context.Background()))

	db, err := sql.Open("sqlite", gw.Store.(*sqlite.Store).Path()+"?_pragma=query_only(1)")
	is.NoErr(err)
	defer db.Close()

	var cached, canceled, failed int
	is.NoErr(db.QueryRow(`SELECT COUNT(*) FILTER (WHERE cached_prompt_tokens > 0), COUNT(*) FILTER (WHERE finish_reason = 'canceled'),
		COUNT(*) FILTER (WHERE finish_reason = 'error') FROM generations`).Scan(&cached, &canceled, &failed))
	is.True(cached > 0 && canceled > 0 && failed > 0) // the mix really was mixed

	ranges := []string{"", "start_date=2025-02-01", "end_date=2025-01-31", "start_date=2025-01-31&end_date=2025-02-01",
		"start_date=2025-01-01&end_date=2025-01-31", "start_date=2025-02-02&end_date=2025-02-02",
		"start_date=2025-01-30T00:00:00Z&end_date=2025-02-03T00:00:00Z", "start_date=2025-03-01"}
	for _, key := range []string{gw.Key, other} {
		for _, groupBy := range []string{"day", "request_type", "application", "api_key"} {
			for _, rg := range ranges {
				q := "group_by=" + groupBy + "&" + rg
				got := getUsage(t, gw, key, q)
				want := usageOverGenerations(t, db, gw, key, groupBy, rg)
				if got.Data == nil {
					got.Data = []usageBucket{}
				}
				if fmt.Sprint(got.Data) != fmt.Sprint(want) {
					t.Errorf("usage?%s:\n got %v\nwant %v", q, got.Data, want)
				}
			}
		}
	}

	// credits, usage and generation agree for each account.
	for _, acct := range [][]string{{gw.Key, key2}, {other}} {
		var sum apd.Decimal
		var ids int64
		for _, key := range acct {
			for _, id := range charged[key] {
				var g struct {
					Data generation `json:"data"`
				}
				getAs(t, gw, key, "/svc/v1/generation?id="+url.QueryEscape(id), &g)
				cost, _, err := apd.NewFromString(g.Data.TotalCost)
				is.NoErr(err)
				_, err = apd.BaseContext.Add(&sum, &sum, cost)
				is.NoErr(err)
				ids++
			}
		}
		var cr credits
		getAs(t, gw, acct[0], "/svc/v1/credits", &cr)
		u := getUsage(t, gw, acct[0], "group_by=api_key")
		is.Equal(u.Total.Requests, ids)     // a generation record for every call charged
		is.Equal(cr.TotalUsed, usdOf(&sum)) // credits = Σ generation
		is.Equal(u.Total.Cost, usdOf(&sum)) // usage = Σ generation
		var balance, credit apd.Decimal
		credit.SetInt64(10)
		_, err = apd.BaseContext.Sub(&balance, &credit, &sum)
		is.NoErr(err)
		is.Equal(cr.Balance, usdOf(&balance)) // balance = credits − total used
	}
}

func usdOf(d *apd.Decimal) string {
	var q apd.Decimal
	if _, err := apd.BaseContext.WithPrecision(34).Quantize(&q, d, -6); err != nil {
		panic(err)
	}
	return q.Text('f')
}

// callForID makes one call and returns the id of the generation it was
// charged for ("" when it was not: a failure before the first event).
func callForID(gw *testGateway, path, key, body, idField string, stream, cancel bool, app [2]string) (string, error) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if app[0] != "" {
		req.Header.Set(app[0], app[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusBadGateway && strings.Contains(body, "FAIL-EARLY") {
		return "", nil
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if !stream {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return "", err
		}
		id, _ := m[idField].(string)
		if id == "" {
			return "", fmt.Errorf("no %s in the response", idField)
		}
		return id, nil
	}
	sc := bufio.NewScanner(resp.Body)
	var id string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) == nil && chunk.ID != "" {
			id = chunk.ID
		}
		if cancel && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			stop() // the caller leaves after the first content
			return id, nil
		}
	}
	if id == "" {
		return "", fmt.Errorf("no id in the stream")
	}
	return id, nil
}

type usageBucket struct {
	Bucket            string `json:"bucket"`
	Requests          int64  `json:"requests"`
	InputTokens       int64  `json:"input_tokens"`
	OutputTokens      int64  `json:"output_tokens"`
	TotalTokens       int64  `json:"total_tokens"`
	CachedInputTokens int64  `json:"cached_input_tokens"`
	CacheWriteTokens  int64  `json:"cache_write_tokens"`
	ReasoningTokens   int64  `json:"reasoning_tokens"`
	Cost              string `json:"cost"`
}

type usageReport struct {
	Data  []usageBucket `json:"data"`
	Total usageBucket   `json:"total"`
}

func getAs(t *testing.T, gw *testGateway, key, path string, v any) {
	t.Helper()
	resp, body := gw.do(t, http.MethodGet, path, "", "Authorization", "Bearer "+key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func getUsage(t *testing.T, gw *testGateway, key, query string) usageReport {
	t.Helper()
	var u usageReport
	getAs(t, gw, key, "/svc/v1/usage?"+query, &u)
	return u
}

// usageOverGenerations computes, from the generations table itself, the
// buckets /usage must show for key's account.
func usageOverGenerations(t *testing.T, db *sql.DB, gw *testGateway, key, groupBy, rangeQuery string) []usageBucket {
	t.Helper()
	k, err := gw.Store.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	q, err := url.ParseQuery(rangeQuery)
	if err != nil {
		t.Fatal(err)
	}
	uq, err := account.ParseUsageQuery(groupBy, q.Get("start_date"), q.Get("end_date"))
	if err != nil {
		t.Fatal(err)
	}
	expr := map[string]string{
		"day": `strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')`, "request_type": "request_type",
		"application": "application", "api_key": "COALESCE(key_id, '')",
	}[groupBy]
	where, args := "account_id = ?", []any{k.AccountID}
	if !uq.Start.IsZero() {
		where += " AND created_at >= ?"
		args = append(args, uq.Start.UnixMilli())
	}
	if !uq.End.IsZero() {
		where += " AND created_at < ?"
		args = append(args, uq.End.UnixMilli())
	}
	rows, err := db.Query(`SELECT `+expr+` AS b, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_prompt_tokens),
		SUM(cache_creation_tokens), SUM(reasoning_tokens), SUM(cost_micros) FROM generations WHERE `+where+` GROUP BY b ORDER BY b`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []usageBucket{}
	for rows.Next() {
		var b usageBucket
		var cost int64
		if err := rows.Scan(&b.Bucket, &b.Requests, &b.InputTokens, &b.OutputTokens, &b.CachedInputTokens,
			&b.CacheWriteTokens, &b.ReasoningTokens, &cost); err != nil {
			t.Fatal(err)
		}
		b.TotalTokens = b.InputTokens + b.OutputTokens
		b.Cost = usd(cost)
		out = append(out, b)
	}
	return out
}

// TestIssuedIDs_CarryTheirTime checks that the account endpoints recognise
// every id the surfaces issue, and read its time: /generation of a
// generation deleted by retention relies on it.
func TestIssuedIDs_CarryTheirTime(t *testing.T) {
	is := is.New(t)
	for _, c := range []interface{ NewID() string }{chat.Codec{}, chat.ResponsesCodec{}, messages.Codec{}, gencontent.Codec{}} {
		before := time.Now().Add(-time.Millisecond)
		id := c.NewID()
		at, ok := account.IssuedAt(id)
		is.True(ok) // recognised
		is.True(!at.Before(before.Truncate(time.Millisecond)) && !at.After(time.Now()))
	}
}
