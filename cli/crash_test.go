//go:build unix

package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
)

// serveArgsEnv, when set in the environment, makes the test binary run
// `svcgw` with the JSON array of arguments it holds instead of the tests:
// the crash tests re-execute themselves as the server they kill, so they
// need no separate build.
const serveArgsEnv = "SVCGWTEST_CLI_ARGS"

func TestMain(m *testing.M) {
	if db := os.Getenv(holdLockEnv); db != "" {
		os.Exit(holdWriteLock(db))
	}
	if args := os.Getenv(serveArgsEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, "bad", serveArgsEnv, err)
			os.Exit(2)
		}
		// As main.go does.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, argv, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(pgtest.Main(m))
}

// child is a `svcgw serve` child process.
type child struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	exited chan error
}

// startServer runs `svcgw --db db serve` in a child process and waits for
// /healthz.
func startServer(t *testing.T, db string, args ...string) *child {
	t.Helper()
	addr := freeAddr(t)
	args = append([]string{"--db", db, "serve", "--addr", addr, "--log-level", "warn"}, args...)
	argv, _ := json.Marshal(args)
	// The arguments are on the child's command line too, after "--" (the
	// test flags' end), so that its os.Args (ps, /debug/pprof/cmdline)
	// hold what svcgw serve's would.
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), serveArgsEnv+"="+string(argv))
	srv := &child{cmd: cmd, addr: addr, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = srv.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	go func() { srv.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-srv.exited
	})
	for range 400 {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return srv
		}
		select {
		case err := <-srv.exited:
			t.Fatalf("server exited: %v: %s", err, srv.stderr.String())
		case <-time.After(25 * time.Millisecond):
		}
	}
	t.Fatalf("server did not come up: %s", srv.stderr.String())
	return nil
}

// load sends chat completions from workers goroutines until stop is
// closed, and collects the ids of the 200s and when each was sent and
// answered.
type load struct {
	mu  sync.Mutex
	ok  map[string]bool
	at  map[string]span
	n   atomic.Int64
	wg  sync.WaitGroup
	bad atomic.Int64 // statuses other than 200 (there should be none)
}

// span is when a call was sent and when its whole answer had been read, on
// the test process's clock.
type span struct{ sent, answered time.Time }

func startLoad(t *testing.T, addr, key string, workers int, stop <-chan struct{}) *load {
	t.Helper()
	l := &load{ok: map[string]bool{}, at: map[string]span{}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 30 * time.Second}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
					strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"load"}]}`))
				req.Header.Set("Authorization", "Bearer "+key)
				sent := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					// The server went away; only 200s count.
					time.Sleep(time.Millisecond)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					continue // cut off mid-body: not a success
				}
				answered := time.Now()
				if resp.StatusCode != http.StatusOK {
					l.bad.Add(1)
					continue
				}
				var c struct{ ID string }
				if json.Unmarshal(body, &c) != nil || c.ID == "" {
					continue
				}
				l.mu.Lock()
				l.ok[c.ID] = true
				l.at[c.ID] = span{sent, answered}
				l.mu.Unlock()
				l.n.Add(1)
			}
		}()
	}
	return l
}

// waitFor waits until the load has n successes.
func (l *load) waitFor(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for l.n.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d successes", l.n.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ledgerCheck reopens the database after the server is gone and checks it:
// integrity, and for the account the reconciliation balance = credits −
// Σ costs, total_used = Σ costs, spend_daily = the generations' sums. It
// returns the ids of the generation rows.
func ledgerCheck(t *testing.T, db string) map[string]bool {
	t.Helper()
	is := is.New(t)
	conn, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(5000)")
	is.NoErr(err) // open raw
	defer conn.Close()
	var integrity string
	is.NoErr(conn.QueryRow(`PRAGMA integrity_check`).Scan(&integrity))
	is.Equal(integrity, "ok") // the file survived

	var balance, used, credits, costs int64
	is.NoErr(conn.QueryRow(`
		SELECT a.balance_micros, a.total_used_micros,
		       (SELECT COALESCE(SUM(amount_micros), 0) FROM credit_transactions c WHERE c.account_id = a.id),
		       (SELECT COALESCE(SUM(cost_micros), 0) FROM generations g WHERE g.account_id = a.id)
		FROM accounts a WHERE a.name = 'load'`).Scan(&balance, &used, &credits, &costs))
	is.Equal(balance, credits-costs) // balance == credits − Σ charges
	is.Equal(used, costs)            // total_used == Σ charges
	var spendBad int
	is.NoErr(conn.QueryRow(`
		SELECT COUNT(*) FROM (
			SELECT account_id, COALESCE(key_id, '') AS key_id, created_at / 86400000 AS day,
			       COUNT(*) AS requests, SUM(cost_micros) AS cost
			FROM generations GROUP BY 1, 2, 3
		) g FULL OUTER JOIN spend_daily d USING (account_id, key_id, day)
		WHERE g.cost IS NOT d.cost_micros OR g.requests IS NOT d.requests`).Scan(&spendBad))
	is.Equal(spendBad, 0) // spend_daily agrees with the generations

	rows, err := conn.Query(`SELECT id FROM generations`)
	is.NoErr(err)
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		is.NoErr(rows.Scan(&id))
		ids[id] = true
	}
	is.NoErr(rows.Err())

	// The store opens it again (recovering the WAL, migrations a no-op).
	st, err := sqlite.Open(context.Background(), db, store.Options{})
	is.NoErr(err) // reopen
	is.NoErr(st.Close())
	return ids
}

// setupLoadAccount creates account "load" with plenty of credits and
// returns its key.
func setupLoadAccount(t *testing.T, db string) string {
	t.Helper()
	if code, _, errOut := run(t, db, "init"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	code, key, errOut := run(t, db, "keys", "create", "--account", "load")
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	if code, _, errOut := run(t, db, "credits", "add", "--account", "load", "1000"); code != 0 {
		t.Fatalf("credits add: %s", errOut)
	}
	return strings.TrimSpace(key)
}

// What a kill -9 may lose (docs/ledger.md): the generations recorded and
// not yet committed. The ledger writer commits its queue oldest first, so
// they are the newest: those of the calls answered during the commit under
// way (a batch, at most 256) and since it began. How many that is depends
// on how long the commit takes, so on the machine's load: a few hundred at
// thousands of calls per second, more behind a commit starved of CPU. What
// holds under any load is that only the newest are lost, and never more
// than the ledger's queue (store.Options.QueueSize: past it calls are
// refused) plus the calls in flight.
const (
	loadWorkers = 16
	ledgerQueue = 4096 // store.Options.QueueSize's default, which serve uses
)

func TestServe_KillNineLosesAtMostTheWindow(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	key := setupLoadAccount(t, db)
	srv := startServer(t, db, "--fixture-ttft", "1ms")

	stop := make(chan struct{})
	l := startLoad(t, srv.addr, key, loadWorkers, stop)
	l.waitFor(t, 400)
	// Some of them committed, so that what was kept and what was lost can
	// be compared below however slow the machine.
	waitCommitted(t, db, 100)
	killed := time.Now()
	is.NoErr(srv.cmd.Process.Signal(syscall.SIGKILL)) // kill -9, mid-load
	err := <-srv.exited
	srv.exited <- err // for the cleanup
	close(stop)
	l.wg.Wait()
	t.Logf("server: %v", err)
	is.Equal(l.bad.Load(), int64(0)) // every call that answered was a 200

	ids := ledgerCheck(t, db)
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := 0
	var newestKept, oldestLost string // by when sent, and when answered
	for id, at := range l.at {
		switch {
		case ids[id]:
			if newestKept == "" || at.sent.After(l.at[newestKept].sent) {
				newestKept = id
			}
		default:
			lost++
			if oldestLost == "" || at.answered.Before(l.at[oldestLost].answered) {
				oldestLost = id
			}
		}
	}
	// A call is metered just before its last bytes are written, so a kill
	// in between can leave a row whose response never arrived: at most one
	// per call in flight.
	unanswered := 0
	for id := range ids {
		if !l.ok[id] {
			unanswered++
		}
	}
	t.Logf("successful responses: %d, generation rows: %d, unanswered: %d, lost: %d", len(l.ok), len(ids), unanswered, lost)
	is.True(unanswered <= loadWorkers)       // only calls in flight at the kill
	is.True(lost <= ledgerQueue+loadWorkers) // never more than the queue and the calls in flight
	if lost == 0 {
		return
	}
	// Only the newest are lost: a call sent after another had been answered
	// was queued after it, so the ledger cannot have kept the later and lost
	// the earlier.
	kept, gone := l.at[newestKept], l.at[oldestLost]
	t.Logf("the lost were answered in the last %v before the kill; the newest call kept was sent %v before it",
		killed.Sub(gone.answered).Round(time.Millisecond), killed.Sub(kept.sent).Round(time.Millisecond))
	if kept.sent.After(gone.answered) {
		t.Errorf("generation %s was lost, and %s, sent %v after it had been answered, was kept: the ledger lost an older generation than one it committed",
			oldestLost, newestKept, kept.sent.Sub(gone.answered))
	}
}

// waitCommitted waits until the database at db holds n generations, read
// as any other process may read it while serve writes.
func waitCommitted(t *testing.T, db string, n int) {
	t.Helper()
	conn, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var got int
		if err := conn.QueryRow(`SELECT COUNT(*) FROM generations`).Scan(&got); err != nil {
			t.Fatalf("count generations: %v", err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d generations committed", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServe_SIGTERMUnderLoadLosesNothing(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	key := setupLoadAccount(t, db)
	srv := startServer(t, db, "--fixture-ttft", "5ms", "--shutdown-grace", "10s")

	stop := make(chan struct{})
	l := startLoad(t, srv.addr, key, loadWorkers, stop)
	l.waitFor(t, 300)
	is.NoErr(srv.cmd.Process.Signal(syscall.SIGTERM)) // graceful, mid-load
	var err error
	select {
	case err = <-srv.exited:
		srv.exited <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not stop: %s", srv.stderr.String())
	}
	close(stop)
	l.wg.Wait()
	is.NoErr(err) // exit 0
	is.Equal(l.bad.Load(), int64(0))

	ids := ledgerCheck(t, db)
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("successful responses: %d, generation rows: %d", len(l.ok), len(ids))
	is.Equal(len(ids), len(l.ok)) // nothing lost
	for id := range l.ok {
		if !ids[id] {
			t.Errorf("200 %s has no generation row", id)
		}
	}
	if strings.Contains(srv.stderr.String(), "dropped") {
		t.Errorf("the ledger dropped generations: %s", srv.stderr.String())
	}
}
