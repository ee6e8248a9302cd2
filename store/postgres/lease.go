package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/svcgw/svcgw/store"
	"golang.org/x/sync/singleflight"
)

// Balance leases: how several svcgw serve instances on one PostgreSQL
// database admit calls without a database round trip per call, and never
// spend together more than one instance alone could (README, "Several
// instances on PostgreSQL").
//
// An instance leases a slice of each account's balance it serves: a row of
// leases, whose hold (granted − charged) only this instance may spend. A
// grant is made under the account's row lock and keeps, over every live
// lease of the account, the holds within the balance and within each of
// the account's caps less the day's and month's committed spend; a key
// with spend caps gets a lease of its own, kept within its caps the same
// way. A slice is sized to the account's use (what the calls in progress
// hold and ask, plus a few seconds of its recent spend when the balance
// left is plenty), never to the balance. Admission then checks each call
// against the lease in memory, the ledger writer takes each committed
// charge off its lease in the same transaction that debits the account,
// and a lease is topped up when the account's budget is refreshed (at most
// once per refresh interval while calls come) or when a call would
// otherwise be refused. A grant short of money asks the peers holding
// slices of the account for their idle part and takes back the leases of
// a peer whose database sessions have all ended (lease_peers.go),
// so that it comes back Short only when the money is gone. A lease is live
// while its instance's heartbeat and liveness lock are: one cut off from
// the database stops admitting locally before the others count its leases
// lapsed, LeaseTTL after its last heartbeat; the heartbeat gives back what
// a lease holds beyond its use, and Close gives everything back.

// DefaultLeaseTTL is how long a lease holds without its instance's
// heartbeat, when Options.LeaseTTL is zero.
const DefaultLeaseTTL = 15 * time.Second

// pgNowMS is the database's clock in Unix milliseconds: lease expiry and
// heartbeats are measured on one clock whatever the instances' clocks say.
const pgNowMS = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`

// leases is the instance's balance leases on PostgreSQL. Its Spend and
// Budget are what admission checks calls against (see Admitter): the
// numbers are the leases', presented so that billing's checks (credits
// less charges, each cap less its spend) come out as "this instance's
// lease has room", with the constraint that bound the last grant (the
// balance or a cap) as the one that refuses.
type leases struct {
	p   *Store
	id  string // this instance's id
	ttl time.Duration

	mu    sync.Mutex
	accts map[int64]*leaseAcct

	started   sync.Once
	serving   atomic.Bool  // Admission started the heartbeat
	instances atomic.Int64 // instances seen lately, this one included
	beaten    atomic.Bool  // a heartbeat has succeeded
	stopLoop  chan struct{}
	loopDone  chan struct{}
	// alive is when (time.Now, monotonic) the leases stop being usable
	// unless a heartbeat keeps them live first.
	aliveMu sync.Mutex
	alive   time.Time

	// beats shares one synchronous heartbeat among the calls that find
	// the leases lapsing (see Spend).
	beats singleflight.Group

	// hold runs fn with what admission holds for the account's calls in
	// progress, no call being admitted meanwhile (billing's
	// Admission.Hold, given by the server through ShrinkWith).
	hold atomic.Pointer[func(accountID int64, fn func(reserved int64))]

	// The liveness lock and inbox (lease_peers.go).
	lockKey     int64
	locked      atomic.Bool // the lock is held (by lockConn's session)
	lockless    atomic.Bool // no lock: live by the heartbeat alone
	lockChecked bool        // the lock was tried once (the listener's)
	lockConn    *pgx.Conn   // the listener's, then stop's
	stopCtx     context.Context
	stopListen  context.CancelFunc
	listenDone  chan struct{}
	askMu       sync.Mutex
	asks        map[uint64]chan struct{} // requests for idle slices awaiting answers
	askSeq      atomic.Uint64
	giving      sync.WaitGroup // answers to peers' requests under way
}

// ShrinkWith lets the heartbeat give back what a lease holds beyond its
// use: hold must run fn with what the account's calls in progress have
// reserved, admitting none meanwhile.
func (l *leases) ShrinkWith(hold func(accountID int64, fn func(reserved int64))) {
	l.hold.Store(&hold)
}

// shrink gives back, of each lease, what it holds beyond the calls in
// progress and twice what was charged on it since the last shrink: a
// slice an instance took in a burst, or no longer uses because the load
// balancer sends the account's calls elsewhere, returns to the others
// within a heartbeat.
func (l *leases) shrink(ctx context.Context) {
	l.mu.Lock()
	accts := make(map[int64]*leaseAcct, len(l.accts))
	for id, a := range l.accts {
		accts[id] = a
	}
	l.mu.Unlock()
	for id, a := range accts {
		l.release(ctx, id, a, true)
	}
}

// release lowers the account's leases to what this instance's calls in
// progress hold (reserved, from admission's Hold) plus what it has charged
// on them (committed or queued), plus, with margin, twice what it charged
// since the last shrink. A lease is lowered here first, under admission's
// lock, so no call is admitted on what is given back, then in the
// database, only if no grant was applied meanwhile: a grant sets the
// lease here to what it wrote, which the lowering must not then undercut
// in the database alone (that would leave this instance spending more
// than the database counts it holding).
func (l *leases) release(ctx context.Context, id int64, a *leaseAcct, margin bool) {
	hold := l.hold.Load()
	if hold == nil {
		return
	}
	type cut struct{ id, from, to int64 }
	var (
		cuts   []cut
		grants uint64
	)
	(*hold)(id, func(reserved int64) {
		a.mu.Lock()
		defer a.mu.Unlock()
		grants = a.grants
		spent := max(a.acct.used-a.usedShrunk, 0)
		if margin {
			a.usedShrunk = a.acct.used
		} else {
			spent = 0
		}
		for _, ls := range append([]*lease{&a.acct}, mapValues(a.keys)...) {
			keep := max(ls.used, 0) + reserved + 2*spent
			if ls.id != 0 && ls.granted > keep {
				cuts = append(cuts, cut{ls.id, ls.granted, keep})
				ls.granted = keep
			}
		}
	})
	if len(cuts) == 0 {
		return
	}
	a.renew.Lock()
	defer a.renew.Unlock()
	a.mu.Lock()
	regranted := a.grants != grants
	a.mu.Unlock()
	if regranted {
		return // the grant's figures stand, here and in the database
	}
	for _, c := range cuts {
		if _, err := l.p.call.Exec(ctx, `UPDATE leases SET granted_micros = $1 WHERE id = $2 AND granted_micros = $3`,
			c.to, c.id, c.from); err != nil {
			l.p.Logger().Warn("leases: giving back an unused slice failed; it stays held until the lease lapses",
				"account_id", id, "error", err)
		}
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// leaseAcct is one account's leases held by this instance.
type leaseAcct struct {
	renew sync.Mutex // one grant at a time per account

	mu       sync.Mutex
	renewed  bool
	credits  int64 // balance + total used, at the last grant
	caps     [2]int64
	acct     lease
	keys     map[string]*lease
	usedLast int64 // acct.used at the last grant: the spend rate
	// usedShrunk is acct.used at the last shrink.
	usedShrunk int64
	// now is the time admission last asked about (Spend's now): the day
	// and month the caps are granted for. Zero: the store's clock.
	now time.Time
	// day is the day the last grant was made for: a call of another day
	// needs a grant of its own (the caps' periods changed).
	day int32
	// grants counts the grants applied (see release).
	grants uint64
}

// lease is one row of leases, as this instance knows it.
type lease struct {
	id      int64 // 0: no row (yet)
	granted int64 // cumulative, as written at the last grant
	used    int64 // cumulative charges recorded against it here, queued ones included
	caps    [2]int64
	// slack is, per constraint (balance, day, month), how much more the
	// last grant could have given: the constraint with the least slack is
	// the one that refuses when the lease is spent.
	slack [3]int64
}

// Leases' constraints, the indexes of lease.slack.
const (
	limBalance = iota
	limDay
	limMonth
)

func newLeases(p *Store, ttl time.Duration) *leases {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	host, _ := os.Hostname()
	return &leases{p: p, id: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b)),
		ttl: store.OrDefault(ttl, DefaultLeaseTTL), accts: make(map[int64]*leaseAcct),
		lockKey: newLockKey(), asks: make(map[uint64]chan struct{})}
}

// Admission returns the instance's balance leases and starts its
// heartbeat: the instance joins the ones the rate limits are shared among.
// Only svcgw serve asks; the admin commands hold no leases.
func (p *Store) Admission() store.Admitter {
	l := p.leases
	l.started.Do(func() {
		l.instances.Store(1)
		l.stopLoop = make(chan struct{})
		l.loopDone = make(chan struct{})
		l.listenDone = make(chan struct{})
		l.stopCtx, l.stopListen = context.WithCancel(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), p.QueryTimeout())
		conn, err := l.relock(ctx)
		if err != nil {
			p.Logger().Warn("leases: taking the liveness lock failed; retrying", "error", err)
		}
		l.lockConn = conn
		if err := l.heartbeat(ctx); err != nil {
			p.Logger().Warn("leases: first heartbeat failed; retrying", "error", err)
		}
		cancel()
		go l.loop()
		if l.lockless.Load() {
			close(l.listenDone)
		} else {
			go l.listen(conn)
		}
		l.serving.Store(true)
	})
	return l
}

// Instances is how many svcgw serve instances have been seen on the
// database within the last three heartbeats, this one included (1 before
// its first heartbeat): the rate limits are divided among them.
func (p *Store) Instances() int {
	if n := p.leases.instances.Load(); n > 1 {
		return int(n)
	}
	return 1
}

// heartbeatEvery is the heartbeat's period: a third of the lease TTL.
func (l *leases) heartbeatEvery() time.Duration { return l.ttl / 3 }

func (l *leases) loop() {
	defer close(l.loopDone)
	t := time.NewTicker(l.heartbeatEvery())
	defer t.Stop()
	for {
		select {
		case <-l.stopLoop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.p.QueryTimeout())
			if err := l.heartbeat(ctx); err != nil {
				l.p.Logger().Warn("leases: heartbeat failed; leases lapse if it goes on", "error", err,
					"lease_ttl", l.ttl.String())
			} else {
				l.shrink(ctx)
			}
			cancel()
		}
	}
}

// heartbeat records the instance as alive, which keeps every lease of it
// live, counts the instances alive, and forgets instances gone for an
// hour with their leases. It writes only its own instances row and rows
// of the dead, so it never waits for, nor deadlocks with, a ledger batch
// or a grant.
func (l *leases) heartbeat(ctx context.Context) error {
	if !l.lockless.Load() && !l.locked.Load() {
		return fmt.Errorf("heartbeat: %w", errLockLost)
	}
	sent := time.Now()
	every := l.heartbeatEvery().Milliseconds()
	var b pgx.Batch
	b.Queue(`WITH old AS (SELECT seen_at + lease_ttl_ms AS live_until FROM instances WHERE id = $1)
		INSERT INTO instances (id, host, pid, started_at, seen_at, lease_ttl_ms, lock_key)
		VALUES ($1, $2, $3, `+pgNowMS+`, `+pgNowMS+`, $4, $5)
		ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, lock_key = excluded.lock_key
		RETURNING (SELECT live_until FROM old), seen_at`, l.id, hostname(), int64(os.Getpid()), l.ttl.Milliseconds(), l.lockKeyArg())
	// An instance whose liveness lock is free is gone, whatever its
	// heartbeat says (the lock held by this transaction is let go at its
	// end).
	b.Queue(`SELECT COUNT(*) FROM instances WHERE seen_at > `+pgNowMS+` - $1
		AND (id = $2 OR lock_key IS NULL OR NOT pg_try_advisory_xact_lock(lock_key))`, 3*every, l.id)
	b.Queue(`DELETE FROM instances WHERE seen_at < ` + pgNowMS + ` - 3600000`)
	b.Queue(`DELETE FROM leases l WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = l.instance_id)`)
	var (
		n         int64
		liveUntil *int64
		seen      int64
		lapsed    bool
	)
	err := pgx.BeginFunc(ctx, l.p.call, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, &b)
		if err := br.QueryRow().Scan(&liveUntil, &seen); err != nil {
			br.Close()
			return err
		}
		if err := br.QueryRow().Scan(&n); err != nil {
			br.Close()
			return err
		}
		for i := 0; i < 2; i++ {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		if err := br.Close(); err != nil {
			return err
		}
		// Back after the others took this instance for gone (or after
		// its row was forgotten): its leases lapsed, and what they held
		// may have been leased again. They are dropped, here and in the
		// database, and granted afresh.
		lapsed = (liveUntil == nil && l.beaten.Load()) || (liveUntil != nil && *liveUntil <= seen)
		if lapsed {
			if _, err := tx.Exec(ctx, `DELETE FROM leases WHERE instance_id = $1`, l.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if lapsed {
		l.p.Logger().Warn("leases: this instance's leases lapsed (no heartbeat for a lease TTL); granting afresh", "lease_ttl", l.ttl.String())
		l.forget()
	}
	l.beaten.Store(true)
	l.instances.Store(max(n, 1))
	l.extend(sent)
	return nil
}

// extend makes every lease usable until a TTL after sent (less a tenth,
// for the clocks' rates), the time the heartbeat that kept them live was
// sent.
func (l *leases) extend(sent time.Time) {
	l.aliveMu.Lock()
	defer l.aliveMu.Unlock()
	if until := sent.Add(l.ttl - l.ttl/10); until.After(l.alive) {
		l.alive = until
	}
}

// valid reports whether the leases may be spent at this instant: a
// heartbeat kept them live lately, and the liveness lock is held (a peer
// may take back the leases of an instance whose lock is free).
func (l *leases) valid() bool {
	if !l.lockless.Load() && !l.locked.Load() {
		return false
	}
	l.aliveMu.Lock()
	defer l.aliveMu.Unlock()
	return time.Now().Before(l.alive)
}

// Health is the store's health (see policy.Health) with the leases' state:
// an instance that may not spend its leases admits no billable call, so it
// is not ready.
func (p *Store) Health(ctx context.Context) store.Health {
	h := p.Policy.Health(ctx)
	h.Leases = p.leases.health()
	return h
}

// health is why the leases may not be spent now (see valid), or nil; nil
// too in a process that serves no calls.
func (l *leases) health() error {
	if !l.serving.Load() {
		return nil
	}
	if !l.lockless.Load() && !l.locked.Load() {
		return fmt.Errorf("leases: %w: this instance's liveness lock is not held (its sessions ended); it admits no call until it takes it again",
			store.ErrUnavailable)
	}
	l.aliveMu.Lock()
	alive := l.alive
	l.aliveMu.Unlock()
	switch {
	case alive.IsZero():
		return fmt.Errorf("leases: %w: no heartbeat has succeeded yet; this instance admits no call until one does", store.ErrUnavailable)
	case !time.Now().Before(alive):
		return fmt.Errorf("leases: %w: no heartbeat has kept this instance's leases live since %s (lease TTL %s); it admits no call until one succeeds",
			store.ErrUnavailable, alive.Add(-l.ttl+l.ttl/10).UTC().Format(time.RFC3339), l.ttl)
	}
	return nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// stop ends the heartbeat and gives every lease back. The ledger has
// committed (or given up on) every charge by then.
func (l *leases) stop() error {
	select {
	case <-l.loopDone:
	default:
		if l.stopLoop == nil {
			return nil // never started: no leases
		}
		close(l.stopLoop)
		<-l.loopDone
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.p.QueryTimeout())
	defer cancel()
	l.stopListen()
	<-l.listenDone
	l.giving.Wait()
	giveBack := func() error {
		var b pgx.Batch
		b.Queue(`DELETE FROM leases WHERE instance_id = $1`, l.id)
		b.Queue(`DELETE FROM instances WHERE id = $1`, l.id)
		return l.p.w.SendBatch(ctx, &b).Close()
	}
	err := giveBack()
	// A pooled connection whose session ended (the instance's sessions
	// cut while it lived) fails before sending: again, until the pool
	// opens one afresh.
	for i := 0; i < pgWritePool && err != nil && pgconn.SafeToRetry(err); i++ {
		err = giveBack()
	}
	// The lock goes last: until the leases are given back, a peer that
	// found it free could take them back itself, no harm done.
	if l.lockConn != nil {
		_ = l.lockConn.Close(ctx)
		l.lockConn = nil
	}
	if err != nil {
		return fmt.Errorf("give leases back: %w (they lapse %s after the last heartbeat)", err, l.ttl)
	}
	return nil
}

// account returns the account's entry, creating it.
func (l *leases) account(id int64) *leaseAcct {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.accts[id]
	if a == nil {
		a = &leaseAcct{keys: make(map[string]*lease)}
		l.accts[id] = a
	}
	return a
}

// Budget grants or tops up the account's leases for a call asking nothing
// (see LeaseBudget).
func (l *leases) Budget(ctx context.Context, accountID int64) (store.Budget, error) {
	return l.LeaseBudget(ctx, accountID, 0, 0)
}

// LeaseBudget tops up the account's lease, and the leases of the keys of
// it this instance serves, so that each holds what the calls in progress
// have reserved plus need, four times over, plus twice what was charged
// since the last grant, within what the balance and the caps leave after
// every other instance's holds. It returns the account's
// credits and caps as read under its row lock. It is one transaction of a
// few statements, made at most once per budget refresh while calls come,
// and when a call would otherwise be refused.
//
// When the grant falls short of what a call asks (Budget.Short), and other
// instances hold some of the account's balance, it asks them to give back
// what their leases hold beyond their calls in progress, waits for their
// answers (askWait at most), and grants again; a peer whose liveness lock
// has been free for lockGrace is gone, and the second grant takes its
// leases back. Short then means the money is really gone: the balance
// less what every live instance holds cannot cover what was asked.
func (l *leases) LeaseBudget(ctx context.Context, accountID int64, reserved, need int64) (store.Budget, error) {
	a := l.account(accountID)
	ctx, cancel := l.p.ReadCtx(ctx)
	defer cancel()
	a.renew.Lock()
	b, g, err := l.grant(ctx, a, accountID, reserved, need, nil)
	a.renew.Unlock()
	// Peers asked give back what is idle, but their own calls may take
	// some of it again before this grant: ask again while that helps.
	for round := 0; round < maxAsks && err == nil && b.Short && need > 0 && (len(g.holders) > 0 || len(g.suspects) > 0); round++ {
		l.askBack(ctx, accountID, g.holders, len(g.suspects) > 0)
		a.renew.Lock()
		before := a.room()
		b, g, err = l.grant(ctx, a, accountID, reserved, need, g.suspects)
		gained := a.room() > before
		a.renew.Unlock()
		if !gained {
			break
		}
	}
	if err != nil {
		return store.Budget{}, fmt.Errorf("lease: %w", l.p.ReadErr(ctx, err))
	}
	return b, nil
}

// maxAsks bounds the rounds of asking peers for idle slices one grant
// makes (see LeaseBudget).
const maxAsks = 3

// room is what the account's lease has left to spend here.
func (a *leaseAcct) room() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acct.granted - a.acct.used
}

// granted is what a grant found of the other instances' leases: the lock
// keys of live peers that hold some of the account (they can be asked to
// give back), and the peers whose liveness lock was free (suspects: gone,
// unless they take their lock again within lockGrace).
type granted struct {
	holders  []int64
	suspects []string
}

// grant is LeaseBudget's transaction; it takes back, for good, the
// account's leases of the peers in reclaim whose liveness lock is still
// free. Callers hold a.renew.
func (l *leases) grant(ctx context.Context, a *leaseAcct, accountID, reserved, need int64, reclaim []string) (store.Budget, granted, error) {
	a.mu.Lock()
	keyIDs := make([]string, 0, len(a.keys))
	for k := range a.keys {
		keyIDs = append(keyIDs, k)
	}
	want := 4*need + 4*max(a.acct.used-a.usedLast, 0)
	now := a.now
	a.mu.Unlock()
	if now.IsZero() {
		now = l.p.Now()
	}
	p := store.PeriodOf(now)

	var (
		out   store.Budget
		info  granted
		apply func()
	)
	err := pgx.BeginFunc(ctx, l.p.call, func(tx pgx.Tx) error {
		info = granted{}
		var (
			balance, used  int64
			daily, monthly *int64
			dbNow          int64
		)
		if err := tx.QueryRow(ctx, `SELECT balance_micros, total_used_micros, daily_cap_micros, monthly_cap_micros, `+pgNowMS+`
			FROM accounts WHERE id = $1 FOR UPDATE`, accountID).Scan(&balance, &used, &daily, &monthly, &dbNow); err != nil {
			if noRows(err) {
				return fmt.Errorf("account %d: %w", accountID, store.ErrNotFound)
			}
			return err
		}
		// Committed spend of the day and month, per key ("" for calls
		// without one) and in all.
		type spent struct{ day, month int64 }
		perKey := map[string]spent{}
		var acctSpent spent
		rows, err := tx.Query(ctx, `SELECT key_id, SUM(CASE WHEN day = $2 THEN cost_micros ELSE 0 END), SUM(cost_micros)
			FROM spend_daily WHERE account_id = $1 AND day >= $3 AND day < $4 GROUP BY key_id`,
			accountID, p.Day, p.MonthStart, p.MonthEnd)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				k string
				s spent
			)
			if err := rows.Scan(&k, &s.day, &s.month); err != nil {
				rows.Close()
				return err
			}
			perKey[k] = s
			acctSpent.day += s.day
			acctSpent.month += s.month
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		others, mine, found, err := l.holds(ctx, tx, accountID, reclaim, dbNow)
		if err != nil {
			return err
		}
		info = found
		// The keys' caps.
		keyCaps := map[string][2]int64{}
		if len(keyIDs) > 0 {
			rows, err = tx.Query(ctx, `SELECT id, daily_cap_micros, monthly_cap_micros FROM api_keys WHERE id = ANY($1)`, keyIDs)
			if err != nil {
				return err
			}
			for rows.Next() {
				var (
					id     string
					d, m   *int64
					capsOf [2]int64
				)
				if err := rows.Scan(&id, &d, &m); err != nil {
					rows.Close()
					return err
				}
				capsOf[0], capsOf[1] = capOf(d), capOf(m)
				keyCaps[id] = capsOf
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}

		a.mu.Lock()
		accUsed := a.acct.used
		keyUsed := map[string]int64{}
		for k, kl := range a.keys {
			keyUsed[k] = kl.used
		}
		a.mu.Unlock()

		caps := [2]int64{capOf(daily), capOf(monthly)}
		// The account's lease: room under the balance and the caps.
		// Ours counts what we have charged beyond it too (queued charges
		// of calls that cost more than they reserved).
		m := mine[""]
		held := max(m.granted-m.charged, accUsed-m.charged, 0)
		room := [3]int64{balance - others[""] - held, noRoom, noRoom}
		for i, c := range caps {
			if c != store.NoCap {
				s := acctSpent.day
				if i == 1 {
					s = acctSpent.month
				}
				room[1+i] = c - s - others[""] - held
			}
		}
		acctLease, err := l.upsert(ctx, tx, accountID, "", m, accUsed, reserved+need, want-need, room)
		if err != nil {
			return err
		}
		// Short: the lease cannot cover what is charged on it, what the
		// calls in progress hold and what the asking call needs.
		short := need > 0 && acctLease.granted < accUsed+reserved+need
		// The keys' leases: room under their caps; none for a key without.
		keyLeases := map[string]lease{}
		for _, k := range keyIDs {
			kc, ok := keyCaps[k]
			if !ok || (kc[0] == store.NoCap && kc[1] == store.NoCap) {
				keyLeases[k] = lease{caps: [2]int64{store.NoCap, store.NoCap}}
				continue
			}
			m := mine[k]
			held := max(m.granted-m.charged, keyUsed[k]-m.charged, 0)
			room := [3]int64{noRoom, noRoom, noRoom}
			for i, c := range kc {
				if c != store.NoCap {
					s := perKey[k].day
					if i == 1 {
						s = perKey[k].month
					}
					room[1+i] = c - s - others[k] - held
				}
			}
			kl, err := l.upsert(ctx, tx, accountID, k, m, keyUsed[k], reserved+need, want-need, room)
			if err != nil {
				return err
			}
			short = short || (need > 0 && kl.granted < keyUsed[k]+need)
			kl.caps = kc
			keyLeases[k] = kl
		}

		// What the grant wrote is spendable here once it is committed:
		// a commit that fails leaves the leases as they were.
		apply = func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.credits, a.caps = balance+used, caps
			a.acct.id, a.acct.granted, a.acct.slack = acctLease.id, acctLease.granted, acctLease.slack
			a.acct.caps = caps
			for k, kl := range keyLeases {
				e := a.keys[k]
				e.id, e.granted, e.slack, e.caps = kl.id, kl.granted, kl.slack, kl.caps
			}
			a.usedLast = a.acct.used
			a.renewed = true
			a.grants++
			a.day = p.Day
		}
		out = store.Budget{Credits: balance + used, DailyCap: caps[0], MonthlyCap: caps[1], Leased: true, Short: short}
		return nil
	})
	if err != nil {
		return store.Budget{}, granted{}, err
	}
	apply()
	return out, info, nil
}

// leaseRow is one lease's row: granted and charged, cumulative.
type leaseRow struct{ granted, charged int64 }

// holds reads every lease of the account in tx, which holds the account's
// row lock (so no grant is made meanwhile): what the other instances'
// live leases hold unspent, per key ("" for the account's balance), and
// this instance's rows (mine); with the live peers holding some of it
// (info.holders) and those whose liveness lock was free (info.suspects).
// The leases of the peers in reclaim whose lock is still free are taken
// back, for good: they hold nothing. dbNow is the database's clock
// (pgNowMS) as tx read it.
func (l *leases) holds(ctx context.Context, tx pgQuerier, accountID int64, reclaim []string, dbNow int64) (
	others map[string]int64, mine map[string]leaseRow, info granted, err error) {
	// Every lease of the account: others' live holds, and ours. A
	// peer's lease is live while its heartbeat is and its liveness
	// lock is held; the lock is tried (and, when free, held by this
	// transaction, so that the peer cannot take it again before it
	// commits) only for a live lease that holds something.
	others = map[string]int64{} // key → holds of other instances
	mine = map[string]leaseRow{}
	rows, err := tx.Query(ctx, `SELECT l.instance_id, l.key_id, l.granted_micros, l.charged_micros,
		       COALESCE(i.seen_at + i.lease_ttl_ms, 0), i.lock_key,
		       CASE WHEN l.instance_id <> $2 AND l.granted_micros > l.charged_micros AND i.lock_key IS NOT NULL
		                 AND i.seen_at + i.lease_ttl_ms > `+pgNowMS+`
		            THEN pg_try_advisory_xact_lock(i.lock_key) ELSE FALSE END
		FROM leases l LEFT JOIN instances i ON i.id = l.instance_id WHERE l.account_id = $1`, accountID, l.id)
	if err != nil {
		return nil, nil, info, err
	}
	var gone []string
	seenHolder := map[int64]bool{}
	seenSuspect := map[string]bool{}
	for rows.Next() {
		var (
			inst, k          string
			granted, charged int64
			expires          int64
			lockKey          *int64
			free             bool
		)
		if err := rows.Scan(&inst, &k, &granted, &charged, &expires, &lockKey, &free); err != nil {
			rows.Close()
			return nil, nil, info, err
		}
		switch {
		case inst == l.id:
			mine[k] = leaseRow{granted, charged}
		case expires <= dbNow:
			// lapsed: holds nothing
		case free && slices.Contains(reclaim, inst):
			if !seenSuspect[inst] {
				seenSuspect[inst] = true
				gone = append(gone, inst)
			}
		default:
			others[k] += max(granted-charged, 0)
			if free {
				if !seenSuspect[inst] {
					seenSuspect[inst] = true
					info.suspects = append(info.suspects, inst)
				}
			} else if lockKey != nil && granted > charged && !seenHolder[*lockKey] {
				seenHolder[*lockKey] = true
				info.holders = append(info.holders, *lockKey)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, info, err
	}
	if len(gone) > 0 {
		// Gone for lockGrace: their leases of the account come back,
		// and their instances row goes, which makes their other
		// leases lapse and tells them, should they come back, that
		// they hold nothing.
		if _, err := tx.Exec(ctx, `DELETE FROM leases WHERE account_id = $1 AND instance_id = ANY($2)`, accountID, gone); err != nil {
			return nil, nil, info, err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM instances WHERE id = ANY($1)`, gone); err != nil {
			return nil, nil, info, err
		}
		l.p.Logger().Info("leases: took back the leases of instances whose database session ended", "account_id", accountID, "instances", gone)
	}
	return others, mine, info, nil
}

// noRoom marks a constraint that does not apply (no such cap).
const noRoom = int64(1) << 62

// upsert writes one lease's top-up: it grows the grant to cover what is
// charged here (used), plus target, as far as room (per constraint, what
// is left for this instance, its current hold included) allows, and
// returns the lease with its slack.
func (l *leases) upsert(ctx context.Context, tx pgx.Tx, accountID int64, keyID string, m struct{ granted, charged int64 },
	used, ask, extra int64, room [3]int64) (lease, error) {
	free := noRoom
	for _, r := range room {
		free = min(free, r)
	}
	// room leaves out what the lease holds: granted − charged, or what is
	// charged here beyond that (used − charged: queued charges of calls
	// that cost more than they reserved). The grant may grow to that hold
	// plus the room: by the room, and by the charges beyond the grant,
	// which it must cover before any of it is spendable here (growing by
	// the room alone would leave the overspent part of it refused). What
	// is asked comes first; the extra only when what is left is plenty
	// (the extra for each instance, twice over), so that when the balance
	// is tight no instance holds more than its calls ask, and a peer short
	// of money finds the rest.
	held := max(m.granted-m.charged, used-m.charged, 0)
	limit := free + m.charged + held - m.granted
	top := max(min(used+ask-m.granted, limit), 0)
	if extra > 0 && limit-top >= 2*extra*max(l.instances.Load(), 1) {
		top += extra
	}
	granted := m.granted + top
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO leases (instance_id, account_id, key_id, granted_micros, charged_micros)
		VALUES ($1, $2, $3, $4, 0)
		ON CONFLICT (account_id, key_id, instance_id) DO UPDATE SET granted_micros = excluded.granted_micros
		RETURNING id`, l.id, accountID, keyID, granted).Scan(&id); err != nil {
		return lease{}, err
	}
	out := lease{id: id, granted: granted}
	least := noRoom
	for i, r := range room {
		out.slack[i] = r - top
		least = min(least, out.slack[i])
	}
	for i := range out.slack {
		out.slack[i] -= least // the tightest constraint has none
	}
	return out, nil
}

// capOf is a nullable cap column as a cap.
func capOf(c *int64) int64 {
	if c == nil {
		return store.NoCap
	}
	return *c
}

// Spend presents the leases to admission: the account's credits less the
// room its lease has left as its charges, and each cap less the room left
// under it as the period's spend (see leases). It reads memory; only a
// key this instance has not served yet, or leases that lapsed (the
// heartbeat failing), cost a grant first.
func (l *leases) Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (store.Spend, error) {
	if !l.valid() {
		// The heartbeat has not succeeded for most of a TTL: the
		// leases may have lapsed for the others. One heartbeat now,
		// shared by the calls that find them so; they fail if it does.
		if _, err, _ := l.beats.Do("", func() (any, error) {
			ctx, cancel := l.p.ReadCtx(context.WithoutCancel(ctx))
			defer cancel()
			// The listener takes the liveness lock again within
			// relockEvery of the database answering.
			for !l.lockless.Load() && !l.locked.Load() && ctx.Err() == nil {
				time.Sleep(relockEvery / 4)
			}
			return nil, l.heartbeat(ctx)
		}); err != nil {
			return store.Spend{}, fmt.Errorf("lease: %w: %w", store.ErrUnavailable, err)
		}
	}
	a := l.account(accountID)
	a.mu.Lock()
	a.now = now
	_, known := a.keys[keyID]
	newDay := a.renewed && a.day != store.DayNumber(now)
	ready := a.renewed && (keyID == "" || known) && !newDay
	a.mu.Unlock()
	if !ready {
		if newDay {
			// A new day: the charges still queued are the last day's,
			// and count in its spend, not this one's, once committed.
			// (On failure they count in both, which only refuses more.)
			_ = l.p.Sync(ctx)
		}
		a.renew.Lock()
		a.mu.Lock()
		if keyID != "" && a.keys[keyID] == nil {
			a.keys[keyID] = &lease{caps: [2]int64{store.NoCap, store.NoCap}}
		}
		a.mu.Unlock()
		// A key served here for the first time gets its share of what
		// its caps leave (need 1: see target).
		ctx, cancel := l.p.ReadCtx(ctx)
		_, _, err := l.grant(ctx, a, accountID, 0, 1, nil)
		cancel()
		a.renew.Unlock()
		if err != nil {
			return store.Spend{}, fmt.Errorf("lease: %w", l.p.ReadErr(ctx, err))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	room := a.acct.granted - a.acct.used
	sp := store.Spend{Total: a.credits - room - a.acct.slack[limBalance]}
	if a.caps[0] != store.NoCap {
		sp.AccountDay = a.caps[0] - room - a.acct.slack[limDay]
	}
	if a.caps[1] != store.NoCap {
		sp.AccountMonth = a.caps[1] - room - a.acct.slack[limMonth]
	}
	if k := a.keys[keyID]; keyID != "" && k != nil && k.id != 0 {
		room := k.granted - k.used
		if k.caps[0] != store.NoCap {
			sp.KeyDay = k.caps[0] - room - k.slack[limDay]
		}
		if k.caps[1] != store.NoCap {
			sp.KeyMonth = k.caps[1] - room - k.slack[limMonth]
		}
	}
	return sp, nil
}

// record counts a charge against the leases it was admitted on.
func (l *leases) record(r *store.GenRow) {
	l.mu.Lock()
	a := l.accts[r.Gen.AccountID]
	l.mu.Unlock()
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.acct.id != 0 {
		r.Lease = a.acct.id
		a.acct.used += r.CostMicros
	}
	if k := a.keys[r.Gen.KeyID]; r.Gen.KeyID != "" && k != nil && k.id != 0 {
		r.KeyLease = k.id
		k.used += r.CostMicros
	}
}

// unrecord takes back a charge the ledger dropped.
func (l *leases) unrecord(r *store.GenRow) {
	l.mu.Lock()
	a := l.accts[r.Gen.AccountID]
	l.mu.Unlock()
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Lease != 0 && a.acct.id == r.Lease {
		a.acct.used -= r.CostMicros
	}
	if k := a.keys[r.Gen.KeyID]; r.KeyLease != 0 && k != nil && k.id == r.KeyLease {
		k.used -= r.CostMicros
	}
}

// pgCharges is the ledger's charge counter on PostgreSQL: a charge is
// counted against the instance's leases of its account and key.
type pgCharges struct{ p *Store }

func (c pgCharges) Record(r store.GenRow) store.GenRow { c.p.leases.record(&r); return r }
func (c pgCharges) Unrecord(r store.GenRow)            { c.p.leases.unrecord(&r) }

// queueLeaseCharges queues, in a ledger batch, the charges taken off the
// leases they were made against (lease id → micro-dollars).
func queueLeaseCharges(b *pgx.Batch, charges map[int64]int64) {
	ids := make([]int64, 0, len(charges))
	amounts := make([]int64, 0, len(charges))
	for id, c := range charges {
		ids = append(ids, id)
		amounts = append(amounts, c)
	}
	b.Queue(`UPDATE leases SET charged_micros = leases.charged_micros + c.amount
		FROM unnest($1::bigint[], $2::bigint[]) AS c(id, amount) WHERE leases.id = c.id`, ids, amounts)
}
