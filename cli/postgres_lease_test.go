//go:build unix

package cli

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
)

// The tests of this file hold svcgw serve processes on one PostgreSQL
// database to what a 402 means there: the account's balance, less what
// every live instance holds or has reserved, cannot cover the call. Each
// ends with the books exact (checkLedger) and the balance not overdrawn.

// leaseCluster starts n svcgw serve processes on a fresh database, with a
// key of an account holding usd, and returns them with the key and a
// connection of the test's own.
func leaseCluster(t *testing.T, n int, usd string, args ...string) ([]*child, string, *pgx.Conn) {
	t.Helper()
	is := is.New(t)
	db := pgtest.DSN(t)
	conn, err := pgx.Connect(context.Background(), db)
	is.NoErr(err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	code, _, _ := run(t, db, "init")
	is.Equal(code, 0) // init
	var srvs []*child
	for range n {
		srvs = append(srvs, startServer(t, db, args...))
	}
	code, key, _ := run(t, db, "keys", "create", "--account", "acct")
	is.Equal(code, 0)
	code, _, _ = run(t, db, "credits", "add", "--account", "acct", usd)
	is.Equal(code, 0)
	return srvs, strings.TrimSpace(key), conn
}

// balanceOf is the account's balance and what the instances' leases of it
// hold, after every instance's ledger has committed.
func balanceOf(t *testing.T, conn *pgx.Conn, srvs []*child, key string) (balance, held int64) {
	t.Helper()
	for _, s := range srvs {
		s.sync(t, key)
	}
	if err := conn.QueryRow(context.Background(), `SELECT a.balance_micros,
		COALESCE((SELECT SUM(GREATEST(granted_micros - charged_micros, 0)) FROM leases l WHERE l.account_id = a.id), 0)
		FROM accounts a WHERE a.name = 'acct'`).Scan(&balance, &held); err != nil {
		t.Fatal(err)
	}
	return balance, held
}

// A first call on one instance leases a few calls' worth, not the balance:
// the other instance's first call on the account is served.
func TestPostgres_ASecondInstanceServesAnAccountTheFirstHasServed(t *testing.T) {
	is := is.New(t)
	srvs, key, conn := leaseCluster(t, 2, "10", "--fixture-ttft", "1ms")
	st, _ := chat(t, srvs[0].addr, key)
	is.Equal(st, http.StatusOK) // the first instance's call
	st, msg := chat(t, srvs[1].addr, key)
	is.Equal(st, http.StatusOK) // and at once the second's, not "add credits"
	if st != http.StatusOK {
		t.Logf("second instance: %s", msg)
	}
	balance, held := balanceOf(t, conn, srvs, key)
	t.Logf("after a call on each: balance %d micro-dollars, leased %d", balance, held)
	is.True(held < balance/100) // the leases hold a few calls, not the balance
	_, rows := checkLedger(t, conn, "acct")
	is.Equal(rows, int64(2))
}

// An instance killed with SIGKILL while it holds a lease: the survivor,
// calling on, is refused only once the money is really gone, and within a
// second of the kill the dead instance's slice is the survivor's, though
// its lease TTL (15 s) is far from over.
func TestPostgres_AKilledInstancesSliceComesBackAtOnce(t *testing.T) {
	is := is.New(t)
	srvs, key, conn := leaseCluster(t, 2, "0.02", "--lease-ttl", "15s", "--fixture-ttft", "20ms")
	ctx := context.Background()

	// The one to be killed serves the account, eight calls at a time,
	// while the other serves a few: it holds a slice, most of it for its
	// calls in flight, when it is killed.
	ceiling := ceilingProbe(t, srvs[1], conn)
	for range 3 {
		st, _ := chat(t, srvs[1].addr, key)
		is.Equal(st, http.StatusOK)
	}
	stop := make(chan struct{})
	doomed := startLoad(t, srvs[0].addr, key, 8, stop)
	doomed.waitFor(t, 10)
	var (
		dead string
		held int64
	)
	for began := time.Now(); held < 4*ceiling; time.Sleep(5 * time.Millisecond) {
		err := conn.QueryRow(ctx, `SELECT l.instance_id, GREATEST(l.granted_micros - l.charged_micros, 0)
			FROM leases l JOIN instances i ON i.id = l.instance_id WHERE i.pid = $1 AND l.key_id = ''`,
			srvs[0].cmd.Process.Pid).Scan(&dead, &held)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if time.Since(began) > 10*time.Second {
			t.Fatalf("the instance to be killed holds only %d micro-dollars", held)
		}
	}
	t.Logf("the instance to be killed holds %d micro-dollars (%d calls' reservations)", held, held/ceiling)

	type answer struct {
		at     time.Duration // since the kill
		status int
	}
	var (
		answers       []answer
		killed        time.Time
		refusedInARow int
	)
	for i := 0; ; i++ {
		if i == 0 {
			is.NoErr(srvs[0].cmd.Process.Signal(syscall.SIGKILL))
			killed = time.Now()
			err := <-srvs[0].exited
			srvs[0].exited <- err
			close(stop)
			doomed.wg.Wait()
		}
		st, _ := chat(t, srvs[1].addr, key)
		at := time.Duration(0)
		if !killed.IsZero() {
			at = time.Since(killed)
		}
		answers = append(answers, answer{at, st})
		is.True(st == http.StatusOK || st == http.StatusPaymentRequired)
		refusedInARow++
		if st != http.StatusPaymentRequired {
			refusedInARow = 0
		}
		if refusedInARow == 5 {
			break // spent
		}
		if time.Since(killed) > 30*time.Second && !killed.IsZero() {
			t.Fatal("the survivor is still being served 30 s after the kill")
		}
	}
	// Every 402 later than a second after the kill is in the final run
	// of refusals: none came while the balance covered a call.
	last200 := -1
	for i, a := range answers {
		if a.status == http.StatusOK {
			last200 = i
		}
	}
	refusedEarly := 0
	for i, a := range answers[:last200+1] {
		if a.status == http.StatusPaymentRequired {
			refusedEarly++
			if a.at > time.Second {
				t.Errorf("call %d, %s after the kill, refused while the balance covered it", i, a.at)
			}
		}
	}
	balance, held := balanceOf(t, conn, srvs[1:], key)
	t.Logf("survivor: %d answers, %d refused before the last 200 (%s after the kill), %d at the end; balance left %d, leased %d, a call reserves %d",
		len(answers), refusedEarly, answers[last200].at, len(answers)-1-last200, balance, held, ceiling)
	is.True(balance >= 0)      // never overdrawn
	is.True(balance < ceiling) // the refusals came when the money was gone
	var dead0 int
	is.NoErr(conn.QueryRow(ctx, `SELECT COUNT(*) FROM leases WHERE instance_id = $1 AND account_id = (SELECT id FROM accounts WHERE name = 'acct')`, dead).Scan(&dead0))
	is.Equal(dead0, 0) // the dead instance's lease was taken back
	checkLedger(t, conn, "acct")
}

// ceilingProbe makes a key on an account of one micro-dollar and returns
// what a chat call reserves, from its refusal.
func ceilingProbe(t *testing.T, srv *child, conn *pgx.Conn) int64 {
	t.Helper()
	is := is.New(t)
	db := conn.Config().ConnString()
	code, key, _ := run(t, db, "keys", "create", "--account", "probe")
	is.Equal(code, 0)
	code, _, _ = run(t, db, "credits", "add", "--account", "probe", "0.000001")
	is.Equal(code, 0)
	st, msg := chat(t, srv.addr, strings.TrimSpace(key))
	is.Equal(st, http.StatusPaymentRequired)
	m := regexp.MustCompile(`may cost up to ([0-9.]+) USD`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no ceiling in %q", msg)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	is.NoErr(err)
	return int64(math.Round(f * 1e6))
}

// burst sends calls at once, call i to srvs[i%len(srvs)], and counts the
// answers by status.
func burst(t *testing.T, srvs []*child, key string, calls int) map[int]int {
	t.Helper()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	start := make(chan struct{})
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, _ := chat(t, srvs[i%len(srvs)].addr, key)
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return statuses
}

// testBurst: three instances have each served the account once (each
// holds a slice of it); then 120 calls come at once, on the instances
// given, each taking long enough that all run together. Exactly what the
// balance covers in reservations is served, to within one, and the rest
// refused.
func testBurst(t *testing.T, on func([]*child) []*child) {
	is := is.New(t)
	srvs, key, conn := leaseCluster(t, 3, "0.02", "--fixture-ttft", "700ms")
	for _, s := range srvs {
		st, _ := chat(t, s.addr, key)
		is.Equal(st, http.StatusOK)
	}
	ceiling := ceilingProbe(t, srvs[0], conn)
	balance, held := balanceOf(t, conn, srvs, key)
	covers := int(balance / ceiling)
	began := time.Now()
	statuses := burst(t, on(srvs), key, 120)
	t.Logf("the burst took %s", time.Since(began))
	left, _ := balanceOf(t, conn, srvs, key)
	t.Logf("left %d; ", left)
	t.Logf("balance %d micro-dollars (%d of it leased), a call reserves %d: covers %d; 120 at once: %v",
		balance, held, ceiling, covers, statuses)
	is.True(left >= 0)                                                          // never overdrawn
	is.Equal(statuses[http.StatusOK]+statuses[http.StatusPaymentRequired], 120) // each served or refused for money
	is.True(statuses[http.StatusOK] <= covers)                                  // never more than the balance covers
	is.True(statuses[http.StatusOK] >= covers-1)                                // and all it covers, within one reservation
	_, rows := checkLedger(t, conn, "acct")
	is.Equal(rows, int64(3+statuses[http.StatusOK])) // every 200 is a generation
}

func TestPostgres_ABurstOnOneInstanceIsServedWhatTheBalanceCovers(t *testing.T) {
	testBurst(t, func(s []*child) []*child { return s[:1] })
}

func TestPostgres_ABurstOverThreeInstancesIsServedWhatTheBalanceCovers(t *testing.T) {
	testBurst(t, func(s []*child) []*child { return s })
}
