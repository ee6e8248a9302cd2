package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// admitLocally is billing's balance check against one instance's leases,
// without billing: the call is admitted when credits − charges cover its
// ceiling, and then charged exactly its ceiling (record), under mu, which
// stands for billing's account lock.
func admitLocally(t *testing.T, mu *sync.Mutex, a store.Admitter, acct int64, credits, ceiling int64, record func()) bool {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	sp, err := a.Spend(context.Background(), acct, "", time.Now())
	if err != nil {
		t.Errorf("spend: %v", err)
		return false
	}
	if credits-sp.Total < ceiling {
		return false
	}
	record()
	return true
}

// TestLeases_InstancesNeverSpendMoreThanTheBalanceTogether runs three
// instances on one database, each admitting calls from its lease as fast
// as it can and topping the lease up when it runs short (as billing does
// on a refusal): together they admit exactly what the balance covers.
func TestLeases_InstancesNeverSpendMoreThanTheBalanceTogether(t *testing.T) {
	is := is.New(t)
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var insts []*Store
	for range 3 {
		insts = append(insts, openTestPostgres(t, dsn, store.Options{LeaseTTL: 3 * time.Second}))
	}
	acct, _, err := insts[0].EnsureAccount(ctx, "shared")
	is.NoErr(err)
	const ceiling, calls = 1000, 100
	_, err = insts[0].AddCredits(ctx, acct.ID, *apd.New(calls*ceiling, -6), "test")
	is.NoErr(err)

	var (
		admitted atomic.Int64
		wg       sync.WaitGroup
		seq      atomic.Int64
	)
	for i, p := range insts {
		a := p.Admission().(*leases)
		var mu sync.Mutex
		a.ShrinkWith(func(_ int64, fn func(int64)) { mu.Lock(); defer mu.Unlock(); fn(0) })
		for range 4 { // four callers per instance
			wg.Add(1)
			go func() {
				defer wg.Done()
				refusals := 0
				for refusals < 3 {
					b, err := a.LeaseBudget(ctx, acct.ID, 0, ceiling)
					if err != nil {
						t.Errorf("lease: %v", err)
						return
					}
					if !admitLocally(t, &mu, a, acct.ID, b.Credits, ceiling, func() {
						p.RecordGeneration(store.Generation{ID: fmt.Sprintf("gen-%d-%d", i, seq.Add(1)), AccountID: acct.ID,
							Cost: money.Micros(ceiling)})
					}) {
						refusals++
						continue
					}
					refusals = 0
					admitted.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	for _, p := range insts {
		is.NoErr(p.Sync(ctx))
	}
	got, err := insts[0].AccountByID(ctx, acct.ID)
	is.NoErr(err)
	t.Logf("admitted %d of %d; balance %s", admitted.Load(), calls, got.Balance.String())
	is.True(admitted.Load() <= calls)                   // never more than the balance covers
	is.True(got.Balance.Sign() >= 0)                    // never overdrawn
	is.True(admitted.Load() >= calls-int64(len(insts))) // and the balance is spent, not stranded in leases

	// Close gives an instance's leases back: the others can take it all.
	held := storetest.QueryInt(t, insts[0], `SELECT COALESCE(SUM(granted_micros - charged_micros), 0) FROM leases`)
	t.Logf("held by leases at the end: %d micro-dollars", held)
	is.NoErr(insts[0].Close())
	is.NoErr(insts[1].Close())
	is.Equal(storetest.QueryInt(t, insts[2], `SELECT COUNT(*) FROM leases WHERE instance_id <> '`+insts[2].leases.id+`'`), int64(0)) // given back
}

// TestLeases_ALapsedInstanceStopsAndItsHoldComesBack: an instance whose
// heartbeat stops while its sessions stay (cut off from the database, as
// the others see it) holds nothing once its leases expire, and stops
// using them itself before that.
func TestLeases_ALapsedInstanceStopsAndItsHoldComesBack(t *testing.T) {
	is := is.New(t)
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const ttl = 3 * time.Second
	p1 := openTestPostgres(t, dsn, store.Options{LeaseTTL: ttl})
	p2 := openTestPostgres(t, dsn, store.Options{LeaseTTL: ttl})
	acct, _, err := p1.EnsureAccount(ctx, "lapse")
	is.NoErr(err)
	_, err = p1.AddCredits(ctx, acct.ID, *apd.New(10000, -6), "test")
	is.NoErr(err)
	a1, a2 := p1.Admission().(*leases), p2.Admission().(*leases)

	_, err = a1.LeaseBudget(ctx, acct.ID, 0, 5000) // p1 takes what is free (it counts one instance... or two)
	is.NoErr(err)
	held1 := storetest.QueryInt(t, p1, `SELECT granted_micros - charged_micros FROM leases WHERE instance_id = '`+a1.id+`'`)
	is.True(held1 > 0)
	b, err := a2.LeaseBudget(ctx, acct.ID, 0, 10000)
	is.NoErr(err)
	sp, err := a2.Spend(ctx, acct.ID, "", time.Now())
	is.NoErr(err)
	is.Equal(b.Credits-sp.Total, 10000-held1) // p2 gets all but p1's slice

	// p1's heartbeat stops (its process "dies" without giving back).
	close(a1.stopLoop)
	<-a1.loopDone
	a1.stopLoop = nil // Close must not give the leases back: this is a crash
	a1.loopDone = nil
	// Its database sessions stay: it is alive but cut off, the case the
	// TTL is for (its liveness lock, held, keeps the others from taking
	// its leases back before).
	t.Cleanup(func() {
		a1.stopListen()
		<-a1.listenDone
		_ = a1.lockConn.Close(context.Background())
	})
	deadline := time.Now().Add(2 * ttl)
	for {
		b, err = a2.LeaseBudget(ctx, acct.ID, 0, 10000)
		is.NoErr(err)
		sp, err = a2.Spend(ctx, acct.ID, "", time.Now())
		is.NoErr(err)
		if b.Credits-sp.Total == 10000 {
			break // p1's slice came back
		}
		if time.Now().After(deadline) {
			t.Fatalf("p1's lease did not lapse within %s", 2*ttl)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// p1 no longer admits from its lapsed lease; when its heartbeat comes
	// back, it drops what it held and is granted afresh.
	is.True(!a1.valid())
	is.NoErr(a1.heartbeat(ctx))
	is.Equal(storetest.QueryInt(t, p1, `SELECT COUNT(*) FROM leases WHERE instance_id = '`+a1.id+`'`), int64(0)) // dropped
	a1.mu.Lock()
	n := len(a1.accts)
	a1.mu.Unlock()
	is.Equal(n, 0) // and forgotten here
	b, err = a1.LeaseBudget(ctx, acct.ID, 0, 1000)
	is.NoErr(err)
	sp, err = a1.Spend(ctx, acct.ID, "", time.Now())
	is.NoErr(err)
	is.Equal(b.Credits-sp.Total, int64(0)) // p2 holds it all now: nothing for p1 until p2 gives back
}

// holding stands for billing's Admission.Hold (see ShrinkWith): reserved
// is what the account's calls in progress hold on this instance.
type holding struct {
	mu       sync.Mutex
	reserved int64
}

func (h *holding) hold(_ int64, fn func(reserved int64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h.reserved)
}

func (h *holding) set(n int64) {
	h.mu.Lock()
	h.reserved = n
	h.mu.Unlock()
}

// heldIn is what the instance's lease of the account holds in the
// database: granted less charged.
func heldIn(t *testing.T, p *Store, id string, acct int64) int64 {
	t.Helper()
	return storetest.QueryInt(t, p, `SELECT COALESCE(SUM(granted_micros - charged_micros), 0) FROM leases
		WHERE instance_id = '`+id+`' AND account_id = `+fmt.Sprint(acct)+` AND key_id = ''`)
}

// leasePair opens two instances on one database, with an account of
// credits micro-dollars; the first has taken a lease of 5,000 of which
// calls in progress hold 3,000. Their heartbeats do not run during a test
// (a 30 s TTL).
func leasePair(t *testing.T, credits int64) (p1, p2 *Store, a1, a2 *leases, acct int64) {
	t.Helper()
	return leasePairOn(t, pgtest.DSN(t), credits)
}

// leasePairOn is leasePair on the database dsn names.
func leasePairOn(t *testing.T, dsn string, credits int64) (p1, p2 *Store, a1, a2 *leases, acct int64) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	p1 = openTestPostgres(t, dsn, store.Options{LeaseTTL: 30 * time.Second})
	p2 = openTestPostgres(t, dsn, store.Options{LeaseTTL: 30 * time.Second})
	a, _, err := p1.EnsureAccount(ctx, "pair")
	is.NoErr(err)
	_, err = p1.AddCredits(ctx, a.ID, *apd.New(credits, -6), "test")
	is.NoErr(err)
	a1, a2 = p1.Admission().(*leases), p2.Admission().(*leases)
	h1 := &holding{}
	a1.ShrinkWith(h1.hold)
	a2.ShrinkWith((&holding{}).hold)
	_, err = a1.LeaseBudget(ctx, a.ID, 0, 5000)
	is.NoErr(err)
	is.Equal(heldIn(t, p1, a1.id, a.ID), int64(5000)) // what was asked, no more: the balance is tight
	h1.set(3000)
	return p1, p2, a1, a2, a.ID
}

// The heartbeat's shrink gives back what a lease holds beyond its calls
// in progress, never what they hold: another instance is then granted the
// rest of the balance and not a micro-dollar of the running calls'.
func TestLeases_TheHeartbeatGivesBackOnlyWhatNoCallHolds(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p1, p2, a1, a2, acct := leasePair(t, 10000)
	a1.shrink(ctx)
	is.Equal(heldIn(t, p1, a1.id, acct), int64(3000)) // the running calls' 3,000 kept, the idle 2,000 given back
	is.Equal(a1.account(acct).room(), int64(3000))    // and no longer spendable here
	b, err := a2.LeaseBudget(ctx, acct, 0, 10000)
	is.NoErr(err)
	is.True(b.Short)                               // the whole balance is not there for p2
	is.Equal(a2.account(acct).room(), int64(7000)) // all but what p1's calls hold
	is.Equal(heldIn(t, p2, a2.id, acct), int64(7000))
}

// A grant short of money asks the peers for their idle slices and gets
// them within the one call: p2's first grant is given what p1 holds
// beyond its calls in progress, and p1 keeps exactly what they hold.
func TestLeases_APeerGivesBackItsIdleSliceOnRequest(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p1, p2, a1, a2, acct := leasePair(t, 10000)
	began := time.Now()
	b, err := a2.LeaseBudget(ctx, acct, 0, 6000)
	is.NoErr(err)
	t.Logf("asking a peer back took %s", time.Since(began))
	is.True(!b.Short)                                 // 6,000 are there: 5,000 unleased and 1,000 of p1's idle 2,000
	is.True(a2.account(acct).room() >= 6000)          // granted at once, not a heartbeat later
	is.Equal(heldIn(t, p1, a1.id, acct), int64(3000)) // p1 gave back its idle slice and kept its calls'
	is.Equal(a1.account(acct).room(), int64(3000))    // and spends no more of it
	b, err = a2.LeaseBudget(ctx, acct, 0, 8000)
	is.NoErr(err)
	is.True(b.Short)                                  // 8,000 are not: p1's calls hold 3,000
	is.Equal(heldIn(t, p2, a2.id, acct), int64(7000)) // so p2 holds the rest, and no more
	is.Equal(heldIn(t, p1, a1.id, acct), int64(3000))
}

// crash ends every session of p at once, as a SIGKILL does, without
// giving its leases back.
func crash(p *Store) {
	p.closeOnce.Do(func() {
		p.stopUpkeep()
		_ = p.StopLedger()
		l := p.leases
		close(l.stopLoop)
		<-l.loopDone
		l.stopListen()
		<-l.listenDone
		_ = l.lockConn.Close(context.Background())
		p.call.Close()
		p.r.Close()
		p.w.Close()
	})
}

// A live peer's leases are never taken back, whatever it holds; once all
// its sessions have ended (it crashed), they come back within a second,
// though its lease TTL is 30 s.
func TestLeases_ACrashedPeersLeasesComeBackAtOnceALiveOnesNever(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p1, p2, a1, a2, acct := leasePair(t, 10000)
	b, err := a2.LeaseBudget(ctx, acct, 0, 10000)
	is.NoErr(err)
	is.True(b.Short)
	is.Equal(heldIn(t, p1, a1.id, acct), int64(3000)) // alive: its calls' share stays
	is.Equal(a2.account(acct).room(), int64(7000))

	crash(p1)
	crashed := time.Now()
	for a2.account(acct).room() < 10000 {
		_, err := a2.LeaseBudget(ctx, acct, 0, 10000)
		is.NoErr(err)
		if time.Since(crashed) > 5*time.Second {
			t.Fatalf("the crashed peer's lease is still held %s after the crash", time.Since(crashed))
		}
	}
	t.Logf("the crashed peer's lease came back %s after the crash", time.Since(crashed))
	is.True(time.Since(crashed) < time.Second)                                                             // within a second
	is.Equal(storetest.QueryInt(t, p2, `SELECT COUNT(*) FROM instances WHERE id = '`+a1.id+`'`), int64(0)) // and it is gone
}

// Close gives the leases back only once the ledger has committed every
// charge taken off them: a peer granting meanwhile is never given money a
// recorded call has spent.
func TestLeases_CloseGivesBackAfterTheLedgerCommits(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	p1 := openTestPostgres(t, dsn, store.Options{LeaseTTL: 30 * time.Second, BatchInterval: time.Hour})
	p2 := openTestPostgres(t, dsn, store.Options{LeaseTTL: 30 * time.Second})
	a, _, err := p1.EnsureAccount(ctx, "closing")
	is.NoErr(err)
	_, err = p1.AddCredits(ctx, a.ID, *apd.New(10000, -6), "test")
	is.NoErr(err)
	a1, a2 := p1.Admission().(*leases), p2.Admission().(*leases)
	_, err = a1.LeaseBudget(ctx, a.ID, 0, 4000)
	is.NoErr(err)
	for i := range 4 { // 4,000 spent, queued: the ledger commits them at Close
		p1.RecordGeneration(store.Generation{ID: fmt.Sprintf("closing-%d", i), AccountID: a.ID, Cost: 1000})
	}
	var (
		most int64
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			_, err := a2.LeaseBudget(ctx, a.ID, 0, 10000)
			if err != nil {
				t.Errorf("lease: %v", err)
				return
			}
			most = max(most, a2.account(a.ID).room())
			if most >= 6000 {
				return
			}
		}
	}()
	is.NoErr(p1.Close())
	<-done
	is.Equal(most, int64(6000)) // p2 got what is left, never the 4,000 spent
	got, err := p2.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(got.Balance.String(), "0.006000")                                                                   // the books: 10,000 − 4,000
	is.Equal(storetest.QueryInt(t, p2, `SELECT COUNT(*) FROM leases WHERE instance_id = '`+a1.id+`'`), int64(0)) // given back
}

// An instance that lives but whose database sessions all end (the server
// cut them) stops admitting at once; if a peer took its leases back
// meanwhile, it drops them when it takes its lock again, and spends
// nothing of what was taken.
func TestLeases_AnInstanceCutFromItsSessionsStopsAndDropsWhatWasTakenBack(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p1, p2, a1, _, acct := leasePair(t, 10000)
	is.Equal(a1.account(acct).room(), int64(5000))
	c, err := p2.r.Acquire(ctx)
	is.NoErr(err)
	peer := c.Hijack() // the test's own session, standing for a peer
	defer peer.Close(ctx)

	// Every session of p1 that holds its lock ends; the peer takes the
	// lock as soon as they are gone (before p1 can take it again), as a
	// grant taking p1's leases back holds it.
	cutSessions(t, peer, a1.lockKey)
	for began := time.Now(); a1.valid(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 5*time.Second {
			t.Fatal("p1 still admits 5 s after its sessions ended")
		}
	}
	_, err = peer.Exec(ctx, `DELETE FROM leases WHERE instance_id = $1`, a1.id)
	is.NoErr(err)
	_, err = peer.Exec(ctx, `DELETE FROM instances WHERE id = $1`, a1.id)
	is.NoErr(err)
	_, err = peer.Exec(ctx, `SELECT pg_advisory_unlock($1)`, a1.lockKey)
	is.NoErr(err)

	for began := time.Now(); !a1.valid(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 5*time.Second {
			t.Fatal("p1 did not take its lock again")
		}
	}
	is.Equal(a1.account(acct).room(), int64(0)) // what was taken back is not spent here
	is.Equal(heldIn(t, p1, a1.id, acct), int64(0))
}

// A lease its calls overspent (queued charges beyond the grant, as when
// calls cost more than they reserved) is topped up to cover them and then
// the rest of the balance: the next call sees all the money left, not
// that less the overspend.
func TestLeases_AnOverspentLeaseIsGrantedAllTheBalanceLeft(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p := openTestPostgres(t, pgtest.DSN(t), store.Options{LeaseTTL: 30 * time.Second, BatchInterval: time.Hour})
	a, _, err := p.EnsureAccount(ctx, "overspent")
	is.NoErr(err)
	_, err = p.AddCredits(ctx, a.ID, *apd.New(10000, -6), "test")
	is.NoErr(err)
	l := p.Admission().(*leases)
	_, err = l.LeaseBudget(ctx, a.ID, 0, 5000)
	is.NoErr(err)
	is.Equal(l.account(a.ID).room(), int64(5000))
	p.RecordGeneration(store.Generation{ID: "overspent-1", AccountID: a.ID, Cost: 7000}) // queued: 2,000 beyond the lease
	is.Equal(l.account(a.ID).room(), int64(-2000))
	b, err := l.LeaseBudget(ctx, a.ID, 0, 3000)
	is.NoErr(err)
	is.True(!b.Short)                             // 3,000 are left of the 10,000
	is.Equal(l.account(a.ID).room(), int64(3000)) // and all of it is spendable here
	b, err = l.LeaseBudget(ctx, a.ID, 0, 3001)
	is.NoErr(err)
	is.True(b.Short) // not a micro-dollar more
	is.NoErr(p.Sync(ctx))
	got, err := p.AccountByID(ctx, a.ID)
	is.NoErr(err)
	is.Equal(got.Balance.String(), "0.003000")
	is.Equal(storetest.QueryInt(t, p, `SELECT granted_micros - charged_micros FROM leases WHERE instance_id = '`+l.id+`'`), int64(3000)) // the hold is the balance
}

// An instance whose liveness lock is not held admits nothing, and its
// health says so, until it takes the lock again; a process that serves no
// calls (no Admission) holds no lock and is not held to one.
func TestLeases_HealthReportsALostLivenessLockUntilItIsTakenAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p1, p2, a1, _, _ := leasePair(t, 10000)
	is.True(p1.Health(ctx).Ready()) // serving, its lock held
	admin := openTestPostgres(t, pgtest.DSN(t), store.Options{})
	is.NoErr(admin.Health(ctx).Leases) // no Admission: no lock to hold
	c, err := p2.r.Acquire(ctx)
	is.NoErr(err)
	peer := c.Hijack()
	defer peer.Close(ctx)

	// p1's sessions that hold its lock end, and the peer holds the lock
	// so that p1 cannot take it again until the peer lets it go.
	cutSessions(t, peer, a1.lockKey)
	for began := time.Now(); a1.valid(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 5*time.Second {
			t.Fatal("p1 still admits 5 s after its sessions ended")
		}
	}
	h := p1.Health(ctx)
	is.True(!h.Ready())
	is.NoErr(h.Database) // the database answers
	is.NoErr(h.Ledger)
	is.True(errors.Is(h.Leases, store.ErrUnavailable))
	is.True(strings.Contains(h.Leases.Error(), "liveness lock is not held")) // says why
	time.Sleep(3 * relockEvery)
	is.True(!p1.Health(ctx).Ready()) // still: the peer holds the lock

	_, err = peer.Exec(ctx, `SELECT pg_advisory_unlock($1)`, a1.lockKey)
	is.NoErr(err)
	for began := time.Now(); !p1.Health(ctx).Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 5*time.Second {
			t.Fatalf("p1 not ready 5 s after its lock came free: %v", p1.Health(ctx).Leases)
		}
	}
	is.True(a1.valid()) // ready again as it admits again
}

// Leases no heartbeat kept live (the database cut off past most of a
// lease TTL) are reported with when the last heartbeat was sent.
func TestLeases_HealthReportsLeasesNoHeartbeatKeptLive(t *testing.T) {
	is := is.New(t)
	p1, _, a1, _, _ := leasePair(t, 10000)
	a1.aliveMu.Lock()
	a1.alive = time.Now().Add(-time.Second) // as if the heartbeats failed since
	a1.aliveMu.Unlock()
	err := p1.Health(context.Background()).Leases
	is.True(errors.Is(err, store.ErrUnavailable))
	is.True(strings.Contains(err.Error(), "no heartbeat has kept this instance's leases live since")) // says why
	is.True(!a1.valid())
}

// cutSessions ends every session that holds the liveness lock key and
// takes the lock on peer, exclusively, before the instance can take it
// again: if the instance's listener took it back first, its sessions are
// ended again (the peer waits for the lock a second at most each time, so
// the test never hangs on it).
func cutSessions(t *testing.T, peer *pgx.Conn, key int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := peer.Exec(ctx, `SET lock_timeout = '1s'`); err != nil {
		t.Fatal(err)
	}
	k := uint64(key)
	var err error
	for try := 0; try < 5; try++ {
		if _, err = peer.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`, int64(k>>32), int64(k&0xffffffff)); err != nil {
			t.Fatal(err)
		}
		if _, err = peer.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the peer could not take the liveness lock: %v", err)
	}
	if _, err := peer.Exec(ctx, `SET lock_timeout = 0`); err != nil {
		t.Fatal(err)
	}
}
