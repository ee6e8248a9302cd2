//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
)

// TestPostgres_EveryCommand runs each command on a PostgreSQL database.
func TestPostgres_EveryCommand(t *testing.T) {
	is := is.New(t)
	db := pgtest.DSN(t)

	code, _, errOut := run(t, db, "keys", "list")
	is.Equal(code, 1) // an admin command does not create the schema
	is.True(strings.Contains(errOut, "no database at"))
	code, _, errOut = run(t, db, "init")
	is.Equal(code, 0) // init creates the schema
	is.True(strings.Contains(errOut, "schema is in place"))
	is.True(!strings.Contains(errOut, "password")) // the URL is redacted

	code, key, errOut := run(t, db, "keys", "create", "--account", "pg")
	is.Equal(code, 0) // keys create
	key = strings.TrimSpace(key)
	is.True(strings.HasPrefix(key, "llm_live_"))
	code, _, errOut = run(t, db, "credits", "add", "--account", "pg", "5")
	is.Equal(code, 0) // credits add
	code, out, _ := run(t, db, "credits", "cap", "--account", "pg", "--daily", "4")
	is.Equal(code, 0) // credits cap
	code, out, _ = run(t, db, "keys", "list", "--json")
	is.Equal(code, 0) // keys list
	var keys []struct{ ID string }
	is.NoErr(json.Unmarshal([]byte(out), &keys))
	is.Equal(len(keys), 1)
	code, _, _ = run(t, db, "keys", "limit", keys[0].ID, "--rpm", "1000")
	is.Equal(code, 0) // keys limit

	addr, _ := serve(t, db)
	resp, err := http.Post("http://"+addr+"/svc/v1/chat/completions?", "application/json", nil)
	is.NoErr(err)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
		strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK) // served from PostgreSQL
	var gen struct{ ID string }
	is.NoErr(json.Unmarshal(body, &gen))
	st, credits := getCredits(t, addr, key)
	is.Equal(st, http.StatusOK)

	code, out, errOut = run(t, db, "credits", "show", "--account", "pg", "--json")
	is.Equal(code, 0) // credits show
	var shown map[string]any
	is.NoErr(json.Unmarshal([]byte(out), &shown))
	is.Equal(shown["balance"], credits["balance"]) // the CLI and the endpoint agree
	code, out, errOut = run(t, db, "usage", "--account", "pg", "--json")
	is.Equal(code, 0) // usage
	is.True(strings.Contains(out, `"requests": 1`) || strings.Contains(out, `"requests":1`))
	code, out, errOut = run(t, db, "generation", gen.ID)
	is.Equal(code, 0) // generation
	is.True(strings.Contains(out, gen.ID))
	code, _, errOut = run(t, db, "keys", "revoke", keys[0].ID)
	is.Equal(code, 0) // keys revoke
	code, _, errOut = run(t, db, "backup", t.TempDir()+"/x.db")
	is.Equal(code, 1) // backup is SQLite's
	is.True(strings.Contains(errOut, "pg_dump"))
	code, _, errOut = run(t, db, "config", "reload")
	is.Equal(code, 1) // no lock file holds a pid on PostgreSQL
	is.True(strings.Contains(errOut, "admin listener"))
}

// TestPostgres_ThreeInstancesShareOneLedger is the multi-instance proof:
// three svcgw serve processes on one PostgreSQL database take 600
// concurrent calls against a balance that covers about 100, and the
// balance is never overdrawn, the ledger reconciles to the micro-dollar
// and the usage roll-ups equal the generations; then one is killed with
// SIGKILL under load, the others keep serving, and what it held comes back
// once its leases expire.
func TestPostgres_ThreeInstancesShareOneLedger(t *testing.T) {
	is := is.New(t)
	db := pgtest.DSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	is.NoErr(err)
	defer conn.Close(ctx)

	code, _, errOut := run(t, db, "init")
	is.Equal(code, 0)
	const ttl = 3 * time.Second
	var srvs []*child
	for range 3 {
		srvs = append(srvs, startServer(t, db, "--lease-ttl", ttl.String(), "--fixture-ttft", "1ms"))
	}

	// What one call costs and reserves, measured on an account of its own.
	code, probeKey, errOut := run(t, db, "keys", "create", "--account", "probe")
	is.Equal(code, 0)
	code, _, errOut = run(t, db, "credits", "add", "--account", "probe", "1")
	is.Equal(code, 0)
	st, id := chat(t, srvs[0].addr, strings.TrimSpace(probeKey))
	is.Equal(st, http.StatusOK)
	srvs[0].sync(t, strings.TrimSpace(probeKey))
	var cost int64
	is.NoErr(conn.QueryRow(ctx, `SELECT cost_micros FROM generations WHERE id = $1`, id).Scan(&cost))
	is.True(cost > 0)

	code, key, errOut := run(t, db, "keys", "create", "--account", "load")
	is.Equal(code, 0)
	key = strings.TrimSpace(key)
	funds := 100 * cost
	code, _, errOut = run(t, db, "credits", "add", "--account", "load", fmt.Sprintf("%d.%06d", funds/1e6, funds%1e6))
	is.Equal(code, 0) // errOut
	_ = errOut

	// 600 calls at once, spread over the three.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := chat(t, srvs[i%3].addr, key)
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("600 calls over 3 instances against a balance of 100 calls: %v", statuses)
	is.Equal(statuses[http.StatusOK]+statuses[http.StatusPaymentRequired], 600) // each served or refused for money
	for _, s := range srvs {
		s.sync(t, key)
	}
	balance, rows := checkLedger(t, conn, "load")
	is.True(balance >= 0)                          // never overdrawn (a fixture call costs at most what it reserves)
	is.Equal(rows, int64(statuses[http.StatusOK])) // every 200 is a generation, and only those
	is.True(statuses[http.StatusOK] >= 90)         // the balance was spent, not stranded in leases
	t.Logf("left: %d micro-dollars (%.1f calls)", balance, float64(balance)/float64(cost))

	// An account's daily cap and a key's monthly cap hold across the three
	// as the balance does: 90 calls at once, 30 per key over the three
	// instances, never spend more than either cap.
	var capKeys []string
	for range 3 {
		code, k, _ := run(t, db, "keys", "create", "--account", "capped")
		is.Equal(code, 0)
		capKeys = append(capKeys, strings.TrimSpace(k))
	}
	code, _, _ = run(t, db, "credits", "add", "--account", "capped", "1")
	is.Equal(code, 0)
	usd := func(m int64) string { return fmt.Sprintf("%d.%06d", m/1e6, m%1e6) }
	code, _, _ = run(t, db, "credits", "cap", "--account", "capped", "--daily", usd(20*cost))
	is.Equal(code, 0)
	code, out, _ := run(t, db, "keys", "list", "--account", "capped", "--json")
	is.Equal(code, 0)
	var capIDs []struct{ ID string }
	is.NoErr(json.Unmarshal([]byte(out), &capIDs))
	code, _, _ = run(t, db, "keys", "limit", capIDs[0].ID, "--monthly", usd(5*cost))
	is.Equal(code, 0)
	capped := map[int]map[int]int{0: {}, 1: {}, 2: {}}
	// Two waves: the first key's 30 calls, then the other two keys' 60.
	// All at once, the other keys could take the whole daily cap before
	// any call of the first key is admitted, which the caps allow.
	for _, wave := range [][2]int{{0, 30}, {30, 90}} {
		for i := wave[0]; i < wave[1]; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, _ := chat(t, srvs[i%3].addr, capKeys[i/30])
				mu.Lock()
				capped[i/30][st]++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	for _, s := range srvs {
		s.sync(t, capKeys[1])
	}
	t.Logf("90 calls over 3 instances, daily cap of 20 calls, first key's monthly cap of 5: %v", capped)
	var capSpent, keySpent int64
	is.NoErr(conn.QueryRow(ctx, `SELECT COALESCE(SUM(g.cost_micros), 0), COALESCE(SUM(g.cost_micros) FILTER (WHERE g.key_id = $1), 0)
		FROM generations g JOIN accounts a ON a.id = g.account_id WHERE a.name = 'capped'`, capIDs[0].ID).Scan(&capSpent, &keySpent))
	is.True(capSpent <= 20*cost) // the account's daily cap holds globally
	is.True(keySpent <= 5*cost)  // the key's monthly cap holds globally
	// A burst can leave up to a slice per instance unspent for a
	// heartbeat (README: a call may be refused while another instance
	// holds the rest); most of the cap is spent all the same.
	is.True(capSpent >= 10*cost)
	is.True(capped[0][http.StatusOK] >= 1)

	// A key's requests per minute hold across the three: 60 calls spread
	// evenly over them with --rpm 30 get 30 through, ±10%.
	code, rlKey, _ := run(t, db, "keys", "create", "--account", "rl")
	is.Equal(code, 0)
	rlKey = strings.TrimSpace(rlKey)
	code, _, _ = run(t, db, "credits", "add", "--account", "rl", "1")
	is.Equal(code, 0)
	code, out, _ = run(t, db, "keys", "list", "--account", "rl", "--json")
	is.Equal(code, 0)
	var rlKeys []struct{ ID string }
	is.NoErr(json.Unmarshal([]byte(out), &rlKeys))
	code, _, _ = run(t, db, "keys", "limit", rlKeys[0].ID, "--rpm", "30")
	is.Equal(code, 0)
	time.Sleep(ttl / 2) // every instance has counted the three
	limited := map[int]int{}
	for i := range 60 {
		st, _ := chat(t, srvs[i%3].addr, rlKey)
		limited[st]++
	}
	t.Logf("60 calls at --rpm 30 over 3 instances: %v", limited)
	is.True(limited[http.StatusOK] >= 27 && limited[http.StatusOK] <= 33) // the key's limit, globally, ±10%
	is.Equal(limited[http.StatusOK]+limited[http.StatusTooManyRequests], 60)
	st, msg := chat(t, srvs[0].addr, rlKey)
	is.Equal(st, http.StatusTooManyRequests)
	is.True(strings.Contains(msg, "the key's limit of 30 per minute is divided among the 3 instances")) // the refusal says why 10

	// An account's requests per minute hold across its keys and the
	// three instances alike: 60 calls from two keys of one account with
	// credits cap --rpm 30 get 30 through, ±10%.
	var teamKeys []string
	for _, name := range []string{"one", "two"} {
		code, k, _ := run(t, db, "keys", "create", "--account", "team", "--name", name)
		is.Equal(code, 0)
		teamKeys = append(teamKeys, strings.TrimSpace(k))
	}
	code, _, _ = run(t, db, "credits", "add", "--account", "team", "1")
	is.Equal(code, 0)
	code, _, _ = run(t, db, "credits", "cap", "--account", "team", "--rpm", "30")
	is.Equal(code, 0)
	limited = map[int]int{}
	for i := range 60 {
		st, _ := chat(t, srvs[i%3].addr, teamKeys[i/3%2]) // each key on each instance
		limited[st]++
	}
	t.Logf("60 calls of two keys at the account's --rpm 30 over 3 instances: %v", limited)
	is.True(limited[http.StatusOK] >= 27 && limited[http.StatusOK] <= 33) // the account's limit, globally, ±10%
	is.Equal(limited[http.StatusOK]+limited[http.StatusTooManyRequests], 60)
	st, msg = chat(t, srvs[1].addr, teamKeys[1])
	is.Equal(st, http.StatusTooManyRequests)
	is.True(strings.Contains(msg, "this account allows 10 requests per minute"))
	is.True(strings.Contains(msg, "the account's limit of 30 per minute is divided among the 3 instances"))

	// A key revoked with the CLI is refused by every instance within the
	// one-second authentication cache.
	code, _, _ = run(t, db, "keys", "revoke", rlKeys[0].ID)
	is.Equal(code, 0)
	time.Sleep(1100 * time.Millisecond)
	for _, s := range srvs {
		st, _ := chat(t, s.addr, rlKey)
		is.Equal(st, http.StatusUnauthorized) // revoked everywhere
	}

	// kill -9 one instance under load.
	code, _, _ = run(t, db, "credits", "add", "--account", "load", fmt.Sprintf("%d.%06d", 4*funds/1e6, 4*funds%1e6))
	is.Equal(code, 0)
	stop := make(chan struct{})
	var loads []*load
	for _, s := range srvs {
		loads = append(loads, startLoad(t, s.addr, key, 4, stop))
	}
	loads[0].waitFor(t, 40)
	var dead string
	is.NoErr(conn.QueryRow(ctx, `SELECT id FROM instances WHERE pid = $1`, srvs[0].cmd.Process.Pid).Scan(&dead))
	is.NoErr(srvs[0].cmd.Process.Signal(syscall.SIGKILL))
	err = <-srvs[0].exited
	srvs[0].exited <- err
	before := loads[1].n.Load() + loads[2].n.Load()
	time.Sleep(ttl)
	after := loads[1].n.Load() + loads[2].n.Load()
	close(stop)
	for _, l := range loads {
		l.wg.Wait()
	}
	t.Logf("survivors served %d calls in the %s after the kill", after-before, ttl)
	is.True(after > before) // the others keep serving
	for _, s := range srvs[1:] {
		s.sync(t, key)
	}
	_, _ = checkLedger(t, conn, "load")
	ids := map[string]bool{}
	r, err := conn.Query(ctx, `SELECT id FROM generations`)
	is.NoErr(err)
	for r.Next() {
		var id string
		is.NoErr(r.Scan(&id))
		ids[id] = true
	}
	r.Close()
	lost := 0
	for id := range loads[0].ok {
		if !ids[id] {
			lost++
		}
	}
	t.Logf("killed instance: %d successful responses, %d not in the ledger", len(loads[0].ok), lost)
	// At most the documented window: what was queued and not committed
	// (PostgreSQL's ledger queue holds 16,384; see postgres.Open)
	// plus the calls in flight (cli/crash_test.go explains the bound).
	is.True(lost <= pgLedgerQueue+loadWorkers)

	// Its leases lapse after the TTL, and what they held is spendable by
	// the survivors: draining the account leaves less than a few calls.
	var deadHeld int64
	is.NoErr(conn.QueryRow(ctx, `SELECT COALESCE(SUM(GREATEST(granted_micros - charged_micros, 0)), 0)
		FROM leases l JOIN accounts a ON a.id = l.account_id WHERE l.instance_id = $1 AND a.name = 'load'`, dead).Scan(&deadHeld))
	var live int
	is.NoErr(conn.QueryRow(ctx, `SELECT COUNT(*) FROM instances WHERE id = $1
		AND seen_at + lease_ttl_ms > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`, dead).Scan(&live))
	is.Equal(live, 0) // the killed instance's leases have expired
	refused := 0
	for i := 0; refused < 6; i++ {
		st, _ := chat(t, srvs[1+i%2].addr, key)
		if st == http.StatusPaymentRequired {
			refused++
		} else {
			is.Equal(st, http.StatusOK)
			refused = 0
		}
	}
	for _, s := range srvs[1:] {
		s.sync(t, key)
	}
	balance, _ = checkLedger(t, conn, "load")
	t.Logf("the killed instance held %d micro-dollars; after draining, %d are left", deadHeld, balance)
	is.True(balance >= 0)
	is.True(balance < 10*cost) // what it held came back
}

// chat makes one chat call and returns its status and generation id.
func chat(t *testing.T, addr, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
		strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"load"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("chat: %v", err)
		return 0, ""
	}
	defer resp.Body.Close()
	var c struct {
		ID    string
		Error struct{ Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&c)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, c.Error.Message
	}
	return resp.StatusCode, c.ID
}

// sync waits for the instance's ledger to commit what it has queued (GET
// /svc/v1/credits syncs first).
func (c *child) sync(t *testing.T, key string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+c.addr+"/svc/v1/credits", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("credits: %d %s\nserver log:\n%s", resp.StatusCode, body, c.stderr.String())
	}
}

// checkLedger checks the account on PostgreSQL: credits − balance = Σ
// generation costs = total_used, to the micro-dollar; spend_daily and the
// daily usage roll-up equal the generations' sums. It returns the balance
// and the number of generations.
func checkLedger(t *testing.T, conn *pgx.Conn, account string) (balance, rows int64) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	var used, credits, costs int64
	is.NoErr(conn.QueryRow(ctx, `
		SELECT a.balance_micros, a.total_used_micros,
		       (SELECT COALESCE(SUM(amount_micros), 0) FROM credit_transactions c WHERE c.account_id = a.id),
		       (SELECT COALESCE(SUM(cost_micros), 0) FROM generations g WHERE g.account_id = a.id),
		       (SELECT COUNT(*) FROM generations g WHERE g.account_id = a.id)
		FROM accounts a WHERE a.name = $1`, account).Scan(&balance, &used, &credits, &costs, &rows))
	is.Equal(credits-balance, costs) // credits added − balance = Σ generation costs
	is.Equal(used, costs)            // total_used = Σ generation costs
	var bad int
	is.NoErr(conn.QueryRow(ctx, `
		SELECT COUNT(*) FROM (
			SELECT account_id, COALESCE(key_id, '') AS key_id, (created_at / 86400000)::INTEGER AS day,
			       COUNT(*) AS requests, SUM(cost_micros) AS cost
			FROM generations GROUP BY 1, 2, 3
		) g FULL OUTER JOIN spend_daily d USING (account_id, key_id, day)
		WHERE g.cost IS DISTINCT FROM d.cost_micros OR g.requests IS DISTINCT FROM d.requests`).Scan(&bad))
	is.Equal(bad, 0) // spend_daily = the generations' sums
	is.NoErr(conn.QueryRow(ctx, `
		SELECT COUNT(*) FROM (
			SELECT account_id, (created_at / 86400000)::INTEGER AS day, COUNT(*) AS requests, SUM(cost_micros) AS cost,
			       SUM(prompt_tokens) AS input, SUM(completion_tokens) AS output
			FROM generations GROUP BY 1, 2
		) g FULL OUTER JOIN (
			SELECT account_id, day, SUM(requests) AS requests, SUM(cost_micros) AS cost,
			       SUM(input_tokens) AS input, SUM(output_tokens) AS output
			FROM usage_daily GROUP BY 1, 2
		) u USING (account_id, day)
		WHERE g.cost IS DISTINCT FROM u.cost OR g.requests IS DISTINCT FROM u.requests
		   OR g.input IS DISTINCT FROM u.input OR g.output IS DISTINCT FROM u.output`).Scan(&bad))
	is.Equal(bad, 0) // usage totals = the generations' sums
	return balance, rows
}

// TestPostgres_DBCopy moves a served SQLite ledger (two accounts, keys
// with limits, credits, caps, generations, roll-ups, feedback, sealing
// keys) to PostgreSQL: every figure matches, the commands report the same
// on both, and a key made on SQLite serves calls from the copy.
func TestPostgres_DBCopy(t *testing.T) {
	is := is.New(t)
	lite := newDB(t)
	pg := pgtest.DSN(t)
	var keys []string
	for _, acct := range []string{"alpha", "beta"} {
		code, key, errOut := run(t, lite, "keys", "create", "--account", acct, "--rpm", "1000")
		is.Equal(code, 0) // errOut
		_ = errOut
		keys = append(keys, strings.TrimSpace(key))
		code, _, _ = run(t, lite, "credits", "add", "--account", acct, "3.5")
		is.Equal(code, 0)
	}
	code, _, _ := run(t, lite, "credits", "cap", "--account", "beta", "--monthly", "3", "--rpm", "6000", "--tpm", "900000")
	is.Equal(code, 0)

	// Serve it for a while, then stop.
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- Run(ctx, []string{"--db", lite, "serve", "--addr", addr}, io.Discard, io.Discard) }()
	for range 200 {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	var ids []string
	for i := range 30 {
		st, id := chat(t, addr, keys[i%2])
		is.Equal(st, http.StatusOK)
		ids = append(ids, id)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/feedback",
		strings.NewReader(`{"id":"`+ids[0]+`","rating":"up","comment":"fine","labels":{"topic":"copy"}}`))
	req.Header.Set("Authorization", "Bearer "+keys[0])
	resp, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK) // feedback recorded
	// A streamed Responses call: its output item is kept (output_items).
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/responses",
		strings.NewReader(`{"model":"gpt-4.1","input":"hi","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+keys[1])
	resp, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
	cancel()
	is.Equal(<-done, 0) // serve stopped

	var out, errb strings.Builder
	code = Run(context.Background(), []string{"db", "copy", "--from", lite, "--to", pg}, &out, &errb)
	t.Logf("db copy:\n%s%s", out.String(), errb.String())
	is.Equal(code, 0) // copied and verified
	is.True(!strings.Contains(out.String(), "MISMATCH"))
	is.Equal(strings.Count(out.String(), "ok\n"), 24)                                            // 12 tables' rows, 12 sums
	is.True(regexp.MustCompile(`output_items +COUNT\(\*\) +1 +1 +ok`).MatchString(out.String())) // the kept item, copied
	is.True(strings.Contains(errb.String(), "every figure matches"))

	for _, args := range [][]string{
		{"credits", "show", "--account", "alpha", "--json"},
		{"credits", "show", "--account", "beta", "--json"},
		{"usage", "--account", "alpha", "--json", "--group-by", "api_key"},
		{"keys", "list", "--json"},
		{"generation", ids[0], "--json"},
	} {
		c1, o1, e1 := run(t, lite, args...)
		c2, o2, e2 := run(t, pg, args...)
		is.Equal(c1, 0) // e1
		is.Equal(c2, 0) // e2
		_, _ = e1, e2
		is.Equal(o1, o2) // the same answer from both databases
	}

	// Served from the copy: the SQLite key authenticates, and the
	// balance goes on from where it was.
	addr2, _ := serve(t, pg)
	st, _ := chat(t, addr2, keys[1])
	is.Equal(st, http.StatusOK)

	// A second copy into a database that holds a ledger is refused.
	code, _, errOut := run(t, lite, "db", "copy", "--from", lite, "--to", pg)
	is.Equal(code, 1)
	is.True(strings.Contains(errOut, "already holds svcgw data"))
}

// pgLedgerQueue is the PostgreSQL store's default ledger queue.
const pgLedgerQueue = 16384
