package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// unheld is the account's balance less what every lease of it holds in
// the database: what is left when every instance has spent its slice.
func unheld(t *testing.T, p *Store, acct int64) int64 {
	t.Helper()
	return storetest.QueryInt(t, p, `SELECT a.balance_micros - COALESCE((SELECT SUM(granted_micros - charged_micros)
		FROM leases WHERE account_id = a.id AND key_id = ''), 0) FROM accounts a WHERE a.id = $1`, acct)
}

// refund credits −micros to the account through p.
func refund(p *Store, acct, micros int64) (store.CreditResult, error) {
	return p.Credit(context.Background(), acct, store.CreditRequest{Amount: money.Micros(-micros).Decimal(), Note: "refund"})
}

// A negative credit takes only what no instance holds for its calls:
// what instances hold idle is asked back (this instance's own, a peer's,
// from an admin command's process that serves no calls), so it is never
// refused for it; what calls in progress hold is refused; and however the
// credits go, the instances together can never spend the balance below
// zero.
func TestLeases_ANegativeCreditTakesOnlyWhatNoInstanceHolds(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	p1, p2, a1, _, acct := leasePairOn(t, dsn, 10000) // p1 holds 5,000, 3,000 of it for calls in progress
	h1 := &holding{}
	h1.set(3000)
	a1.ShrinkWith(h1.hold)

	// On the instance holding the slice: 5,000 are unleased and 2,000 of
	// its own are idle, so 6,000 may go.
	r, err := refund(p1, acct, 6000)
	is.NoErr(err)
	is.Equal(r.Account.Balance.String(), "0.004000")
	is.Equal(heldIn(t, p1, a1.id, acct), int64(3000)) // its calls' 3,000 kept
	is.Equal(a1.account(acct).room(), int64(3000))    // and no more spendable there
	is.Equal(unheld(t, p1, acct), int64(1000))

	// From the peer: 1,001 more would leave less than p1's calls hold.
	began := time.Now()
	_, err = refund(p2, acct, 1001)
	is.True(errors.Is(err, store.ErrNegativeBalance)) // 422, as a refund past the balance
	is.True(strings.Contains(err.Error(), "hold 0.003000 USD for calls in progress"))
	t.Logf("refused in %s: %v", time.Since(began), err)
	r, err = refund(p2, acct, 1000) // exactly what is not held
	is.NoErr(err)
	is.Equal(r.Account.Balance.String(), "0.003000")
	is.Equal(unheld(t, p1, acct), int64(0))

	// The calls end, costing 2,000 of their 3,000: p1's slice holds 1,000
	// idle, which an admin command (a process serving no calls) may take
	// back, and p1 may spend nothing more.
	p1.RecordGeneration(store.Generation{ID: "gen-in-progress", AccountID: acct, Cost: money.Micros(2000)})
	h1.set(0)
	is.NoErr(p1.Sync(ctx))
	admin := openTestPostgres(t, dsn, store.Options{})
	r, err = refund(admin, acct, 1000)
	is.NoErr(err)
	is.Equal(r.Account.Balance.String(), "0.000000")
	is.Equal(heldIn(t, p1, a1.id, acct), int64(0))
	is.Equal(a1.account(acct).room(), int64(0))
	b, err := a1.LeaseBudget(ctx, acct, 0, 1)
	is.NoErr(err)
	is.True(b.Short) // nothing left to admit a call on
	_, err = refund(admin, acct, 1)
	is.True(errors.Is(err, store.ErrNegativeBalance)) // the balance itself is zero
	storetest.CheckLedger(t, p1)
}

// A slice held by an instance that crashed does not stand in the way of
// a negative credit: its leases are taken back, as a grant takes them.
func TestLeases_ANegativeCreditTakesBackACrashedInstancesSlice(t *testing.T) {
	is := is.New(t)
	p1, p2, a1, _, acct := leasePair(t, 10000) // p1 holds 5,000, 3,000 of it for calls in progress
	crash(p1)
	began := time.Now()
	r, err := refund(p2, acct, 10000)
	is.NoErr(err)
	t.Logf("the crashed instance's slice came back within the credit, in %s", time.Since(began))
	is.Equal(r.Account.Balance.String(), "0.000000")
	is.Equal(storetest.QueryInt(t, p2, `SELECT COUNT(*) FROM leases WHERE instance_id = '`+a1.id+`'`), int64(0))
	is.Equal(unheld(t, p2, acct), int64(0))
}
