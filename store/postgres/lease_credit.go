package postgres

import (
	"context"
	"fmt"

	"github.com/svcgw/svcgw/store"
)

var _ store.BalanceHolder = (*Store)(nil)

// HeldBalance is what the live leases of the account's balance hold
// unspent (see store.BalanceHolder), read in tx, a credit's transaction on
// the writer pool holding the account's row lock: no grant is made
// meanwhile, and a ledger batch debiting the account waits for it. Each
// lease holds granted − charged; this instance's own also what it has
// charged beyond its grant, still queued. Peers whose liveness lock is
// free are counted until a later read, after lockGrace, finds them still
// gone (gone) and takes their leases back, as a grant does.
//
// Reclaim asks the peers holding some of it to give back what their calls
// in progress do not hold (as a grant short of money does), gives back
// this instance's own idle part at once, and waits for the answers
// (askWait at most; lockGrace at least when a peer seemed gone). A process
// that serves no calls (an admin command) holds no leases; it does not
// read its inbox either, so it waits the whole askWait for the peers,
// which give back all the same.
func (p *Store) HeldBalance(ctx context.Context, tx store.Conn, accountID int64, gone []string) (store.Held, error) {
	c, ok := tx.(pgConn)
	if !ok {
		return store.Held{}, fmt.Errorf("held balance: %T is not a transaction of this store", tx)
	}
	l := p.leases
	var dbNow int64
	if err := c.db.QueryRow(ctx, `SELECT `+pgNowMS).Scan(&dbNow); err != nil {
		return store.Held{}, err
	}
	others, mine, info, err := l.holds(ctx, c.db, accountID, gone, dbNow)
	if err != nil {
		return store.Held{}, err
	}
	h := store.Held{Micros: others[""], Gone: info.suspects}
	var own *leaseAcct
	if m, ok := mine[""]; ok {
		used := m.charged // nothing more charged here than the database knows
		l.mu.Lock()
		a := l.accts[accountID]
		l.mu.Unlock()
		if a != nil {
			a.mu.Lock()
			if a.acct.id != 0 {
				used = a.acct.used
			}
			a.mu.Unlock()
		}
		h.Micros += max(m.granted-m.charged, used-m.charged, 0)
		// What is granted beyond what is charged here may be idle:
		// release finds out, under admission's lock.
		if a != nil && m.granted > used && l.hold.Load() != nil {
			own = a
		}
	}
	if own != nil || len(info.holders) > 0 || len(info.suspects) > 0 {
		holders, suspects := info.holders, len(info.suspects) > 0
		h.Reclaim = func(ctx context.Context) {
			if own != nil {
				l.release(ctx, accountID, own, false)
			}
			if len(holders) > 0 || suspects {
				l.askBack(ctx, accountID, holders, suspects)
			}
		}
	}
	return h, nil
}
