//go:build unix

package cli

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// holdLockEnv, when set to a database path, makes the test binary take
// that database's write lock (BEGIN IMMEDIATE), print "locked", and hold
// it until its stdin closes: another process holding the lock.
const holdLockEnv = "SVCGWTEST_HOLD_WRITE_LOCK"

func holdWriteLock(db string) int {
	conn, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	if _, err := conn.Exec("BEGIN IMMEDIATE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if _, err := conn.Exec("ROLLBACK"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// runChild runs `svcgw` with args in a child process and waits for it.
func runChild(t *testing.T, timeout time.Duration, args ...string) (code int, stderr string) {
	t.Helper()
	argv, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveArgsEnv+"="+string(argv))
	var errb syncBuffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("svcgw %v did not exit within %s: %s", args, timeout, errb.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), errb.String()
	}
	if err != nil {
		t.Fatalf("run svcgw %v: %v", args, err)
	}
	return 0, errb.String()
}

// call sends one chat completion and returns its status, Retry-After, body
// and how long it took.
func call(t *testing.T, client *http.Client, addr, key string) (int, string, []byte, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/svc/v1/chat/completions",
		strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("call: %v (after %s)", err, time.Since(start))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), body, time.Since(start)
}

// generationID is the id of a chat completion.
func generationID(t *testing.T, body []byte) string {
	t.Helper()
	var c struct{ ID string }
	if err := json.Unmarshal(body, &c); err != nil || c.ID == "" {
		t.Fatalf("200 without an id: %s", body)
	}
	return c.ID
}

// readyz returns GET /readyz's status and body.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady polls /readyz until it answers want.
func waitReady(t *testing.T, addr string, want int, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		status, body := readyz(t, addr)
		if status == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after %s: %s", status, within, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.exited:
		c.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("server exited: %v: %s", err, c.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not stop: %s", c.stderr.String())
	}
}

// TestServe_SecondServeOnTheSameDatabaseIsRefused: two `svcgw serve`
// processes on one database would each spend the balance; the second is
// refused with a clear message while the first runs, the admin commands
// keep working beside it, and a killed server leaves no stale lock.
func TestServe_SecondServeOnTheSameDatabaseIsRefused(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	key := setupLoadAccount(t, db)
	first := startServer(t, db)

	code, stderr := runChild(t, 30*time.Second, "--db", db, "serve", "--addr", freeAddr(t))
	is.Equal(code, 1) // refused
	t.Logf("second serve: %s", strings.TrimSpace(stderr))
	is.True(strings.Contains(stderr, "another svcgw serve is using this database"))
	is.True(strings.Contains(stderr, "held by process "+strconv.Itoa(first.cmd.Process.Pid))) // names the holder
	is.True(strings.Contains(stderr, db))

	// The admin commands work beside the server, and it sees their changes.
	code, out, errOut := run(t, db, "credits", "add", "--account", "load", "5")
	is.Equal(code, 0) // credits add beside a running server
	_ = out
	code, _, errOut = run(t, db, "keys", "list", "--account", "load")
	is.Equal(code, 0) // keys list beside a running server
	is.Equal(errOut, "")
	status, credits := getCredits(t, first.addr, key)
	is.Equal(status, http.StatusOK)
	is.Equal(credits["balance"], "1005.000000")

	// A server killed outright releases the lock with its process.
	is.NoErr(first.cmd.Process.Signal(syscall.SIGKILL))
	err := <-first.exited
	first.exited <- err
	second := startServer(t, db)
	status, _ = getCredits(t, second.addr, key)
	is.Equal(status, http.StatusOK)
	second.stop(t)
}

// TestServe_WriteLockHeldByAnotherProcess: another process holding the
// database's write lock makes no call hang. Calls already admitted are
// answered and their generations held; once the ledger's commit times
// out, calls are refused with a native 503, readiness and the log say why,
// and when the lock is released everything answered is recorded.
func TestServe_WriteLockHeldByAnotherProcess(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	key := setupLoadAccount(t, db)
	admin := freeAddr(t)
	srv := startServer(t, db, "--fixture-ttft", "1ms", "--admin-addr", admin)
	client := &http.Client{Timeout: 30 * time.Second}
	ok := map[string]bool{}
	for range 5 {
		status, _, body, _ := call(t, client, srv.addr, key)
		is.Equal(status, http.StatusOK)
		ok[generationID(t, body)] = true
	}

	locker := exec.Command(os.Args[0], "-test.run=^$")
	locker.Env = append(os.Environ(), holdLockEnv+"="+db)
	stdin, err := locker.StdinPipe()
	is.NoErr(err)
	stdout, err := locker.StdoutPipe()
	is.NoErr(err)
	locker.Stderr = os.Stderr
	is.NoErr(locker.Start())
	t.Cleanup(func() { _ = locker.Process.Kill(); _ = locker.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	is.NoErr(err)
	is.Equal(line, "locked\n") // another process holds the write lock

	// Calls go on: answered while the ledger waits for the lock, refused
	// once its commit has timed out. None may hang.
	var refused int
	var slowest time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for refused < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("no refusals while the lock was held: %s", srv.stderr.String())
		}
		status, retry, body, took := call(t, client, srv.addr, key)
		slowest = max(slowest, took)
		switch status {
		case http.StatusOK:
			ok[generationID(t, body)] = true
		case http.StatusServiceUnavailable:
			refused++
			is.Equal(retry, "5")
			is.True(strings.Contains(string(body), `"service_unavailable_error"`)) // the chat envelope
		default:
			t.Fatalf("status %d: %s", status, body)
		}
	}
	t.Logf("answered %d, then refused %d; slowest call %s", len(ok), refused, slowest)
	is.True(slowest < 2*time.Second) // no call waits for the database
	status, body := readyz(t, srv.addr)
	is.Equal(status, http.StatusServiceUnavailable)
	t.Logf("readyz: %s", body)
	is.True(strings.Contains(body, `"ledger":"unavailable"`)) // callers are told the ledger is down
	_, body = readyz(t, admin)                                // the admin listener says why
	is.True(strings.Contains(body, "locked") || strings.Contains(body, "did not finish in time"))
	start := time.Now()
	cstatus, _ := getCredits(t, srv.addr, key)
	is.Equal(cstatus, http.StatusServiceUnavailable) // no balance it cannot vouch for
	is.True(time.Since(start) < 2*time.Second)       // and no hang
	hresp, err := http.Get("http://" + srv.addr + "/healthz")
	is.NoErr(err)
	hresp.Body.Close()
	is.Equal(hresp.StatusCode, http.StatusOK) // alive, just not ready

	is.NoErr(stdin.Close()) // the other process lets go
	is.NoErr(locker.Wait())
	waitReady(t, srv.addr, http.StatusOK, 15*time.Second)
	for range 5 {
		status, _, body, _ := call(t, client, srv.addr, key)
		is.Equal(status, http.StatusOK)
		ok[generationID(t, body)] = true
	}
	srv.stop(t)

	ids := ledgerCheck(t, db) // reconciles exactly
	for id := range ok {
		if !ids[id] {
			t.Errorf("200 %s has no generation row", id)
		}
	}
	is.Equal(len(ids), len(ok)) // every answered call, once
	logs := srv.stderr.String()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "ledger") {
			t.Logf("log: %s", l)
		}
	}
	is.Equal(strings.Count(logs, "ledger cannot record generations"), 1) // said once
	is.Equal(strings.Count(logs, "ledger recovered"), 1)
	is.True(!strings.Contains(logs, "dropped"))
	is.Equal(strings.Count(logs, "level=ERROR"), 1) // and only that at Error
}

// With an admin listener, shutdown says which listener each line is for.
func TestServe_ShutdownNamesEachListener(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "svcgw.db")
	admin := freeAddr(t)
	srv := startServer(t, db, "--admin-addr", admin, "--log-level", "info", "--shutdown-grace", "7s")
	srv.stop(t)
	var lines []string
	for _, l := range strings.Split(srv.stderr.String(), "\n") {
		if strings.Contains(l, `msg="shutting down"`) {
			lines = append(lines, l)
		}
	}
	is.Equal(len(lines), 2) // one per listener
	var calls, adm string
	for _, l := range lines {
		if strings.Contains(l, "listener=admin") {
			adm = l
		} else {
			calls = l
		}
	}
	is.True(strings.Contains(adm, "addr="+admin) && strings.Contains(adm, "grace=1s"))        // the admin listener's
	is.True(strings.Contains(calls, "addr="+srv.addr) && strings.Contains(calls, "grace=7s")) // the callers'
}
