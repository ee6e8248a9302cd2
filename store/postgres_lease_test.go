package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/money"
)

// admitLocally is billing's balance check against one instance's leases,
// without billing: the call is admitted when credits − charges cover its
// ceiling, and then charged exactly its ceiling (record), under mu, which
// stands for billing's account lock.
func admitLocally(t *testing.T, mu *sync.Mutex, a Admitter, acct int64, credits, ceiling int64, record func()) bool {
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
	var insts []*Postgres
	for range 3 {
		insts = append(insts, openTestPostgres(t, dsn, Options{LeaseTTL: 3 * time.Second}))
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
						p.RecordGeneration(Generation{ID: fmt.Sprintf("gen-%d-%d", i, seq.Add(1)), AccountID: acct.ID,
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
	held := queryInt(t, insts[0], `SELECT COALESCE(SUM(granted_micros - charged_micros), 0) FROM leases`)
	t.Logf("held by leases at the end: %d micro-dollars", held)
	is.NoErr(insts[0].Close())
	is.NoErr(insts[1].Close())
	is.Equal(queryInt(t, insts[2], `SELECT COUNT(*) FROM leases WHERE instance_id <> '`+insts[2].leases.id+`'`), int64(0)) // given back
}

// TestLeases_ALapsedInstanceStopsAndItsHoldComesBack: an instance whose
// heartbeat stops (as when it dies) holds nothing once its leases expire,
// and stops using them itself before that.
func TestLeases_ALapsedInstanceStopsAndItsHoldComesBack(t *testing.T) {
	is := is.New(t)
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const ttl = 3 * time.Second
	p1 := openTestPostgres(t, dsn, Options{LeaseTTL: ttl})
	p2 := openTestPostgres(t, dsn, Options{LeaseTTL: ttl})
	acct, _, err := p1.EnsureAccount(ctx, "lapse")
	is.NoErr(err)
	_, err = p1.AddCredits(ctx, acct.ID, *apd.New(10000, -6), "test")
	is.NoErr(err)
	a1, a2 := p1.Admission().(*leases), p2.Admission().(*leases)

	_, err = a1.LeaseBudget(ctx, acct.ID, 0, 5000) // p1 takes what is free (it counts one instance... or two)
	is.NoErr(err)
	held1 := queryInt(t, p1, `SELECT granted_micros - charged_micros FROM leases WHERE instance_id = '`+a1.id+`'`)
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
	is.Equal(queryInt(t, p1, `SELECT COUNT(*) FROM leases WHERE instance_id = '`+a1.id+`'`), int64(0)) // dropped
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
