package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// An instance's liveness lock and inbox (see leases): each instance holds
// a session-level advisory lock on its lock_key, shared, on a connection
// of its own that LISTENs on its inbox channel and on each of its ledger
// writer's connections. PostgreSQL releases a session's lock the moment
// the session ends, so a grant that can take the lock (exclusively) knows
// that every session of the peer is gone: it was killed, and no batch of
// its ledger can commit any more charges against what it held; the grant
// takes its leases back without waiting for its lease TTL. A grant short
// of money asks the peers that hold some of the account's balance, on
// their inboxes, to give back what their leases hold beyond their calls in
// progress, and waits for their answers within the call's admission.

const (
	// lockGrace is how long a peer's liveness lock must stay free before a
	// grant takes its leases back: an instance whose sessions all end while
	// it lives (the server restarted, its connections cut) stops admitting
	// the moment its listener reads the end on its socket, well within it,
	// and keeps its leases if it takes its lock again first.
	lockGrace = 250 * time.Millisecond
	// askWait bounds how long a grant short of money waits for the peers
	// it asked to give back: a peer answers in a round trip or two, and
	// one that does not answer (cut off from the database) keeps its hold
	// until its lease TTL.
	askWait = 500 * time.Millisecond
	// relockEvery is how often an instance whose liveness lock's session
	// ended tries to take it again.
	relockEvery = 100 * time.Millisecond
)

// errLockLost is a heartbeat refused because the instance's liveness lock
// is not held: its leases may be taken back, so it admits nothing until it
// holds the lock again.
var errLockLost = errors.New("the instance's liveness lock is not held (its database session ended)")

// newLockKey returns a random advisory lock key for an instance: neither
// zero nor the migrations' key.
func newLockKey() int64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if k := int64(binary.LittleEndian.Uint64(b[:])); k != 0 && k != pgAdvisoryLock {
			return k
		}
	}
}

// inboxOf is the channel the instance holding lock key k listens on.
func inboxOf(k int64) string { return "svcgw_lease_" + strconv.FormatUint(uint64(k), 16) }

// lockKeyArg is the instance's lock_key as written in its instances row:
// NULL when it holds no liveness lock (the server's advisory locks proved
// not exclusive), and the others then go by its heartbeat alone.
func (l *leases) lockKeyArg() *int64 {
	if l.lockless.Load() {
		return nil
	}
	return &l.lockKey
}

// relock opens the liveness lock's connection, takes the lock and listens
// on the inbox. After the first time, it is the instance coming back from
// a session that ended: if a peer took its leases back meanwhile (its
// instances row is gone: a grant deletes it with the leases, holding the
// lock meanwhile), it drops them here, before admitting again.
func (l *leases) relock(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.p.call.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*pgx.Conn, error) {
		_ = conn.Close(context.Background())
		return nil, err
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock_shared($1)`, l.lockKey).Scan(&got); err != nil {
		return fail(err)
	}
	if !got {
		return fail(errors.New("a peer holds the liveness lock: it is taking this instance's leases back"))
	}
	if !l.lockChecked {
		// Another session must not be able to take it: a server whose
		// advisory locks are not exclusive would make every peer look
		// gone. Then the instance goes by its heartbeat alone.
		var also bool
		if err := pgx.BeginFunc(ctx, l.p.call, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, l.lockKey).Scan(&also)
		}); err != nil {
			return fail(err)
		}
		if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{inboxOf(l.lockKey)}.Sanitize()); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				return fail(err)
			}
			also = true // no LISTEN: the others could not ask this instance
		}
		l.lockChecked = true
		if also {
			l.lockless.Store(true)
			l.p.Logger().Warn("leases: the database's advisory locks or LISTEN do not work as PostgreSQL's; this instance is live by its heartbeat alone, and a crash holds its leases for the lease TTL",
				"lease_ttl", l.ttl.String())
			return conn, nil
		}
	} else if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{inboxOf(l.lockKey)}.Sanitize()); err != nil {
		return fail(err)
	}
	if l.beaten.Load() {
		var kept bool
		if err := l.p.call.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM instances WHERE id = $1)`, l.id).Scan(&kept); err != nil {
			return fail(err)
		}
		if !kept {
			if _, err := l.p.call.Exec(ctx, `DELETE FROM leases WHERE instance_id = $1`, l.id); err != nil {
				return fail(err)
			}
			l.forget()
			l.p.Logger().Warn("leases: this instance's leases were taken back while its database session was gone; granting afresh")
		}
	}
	l.locked.Store(true)
	return conn, nil
}

// writerLock returns after, preceded by taking the liveness lock (shared)
// on the ledger writer's new connection: while a batch of this instance's
// ledger may still commit, its peers cannot take its leases back. A server
// that refuses the lock gets none (the instance is then live by its
// heartbeat alone: see relock).
func (l *leases) writerLock(after func(context.Context, *pgx.Conn) error) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, l.lockKey); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				return err // the connection failed
			}
			l.p.Logger().Debug("postgres: the server refuses advisory locks", "error", err)
		}
		if after == nil {
			return nil
		}
		return after(ctx, conn)
	}
}

// forget drops every lease this instance knows of.
func (l *leases) forget() {
	l.mu.Lock()
	l.accts = make(map[int64]*leaseAcct)
	l.mu.Unlock()
}

// listen holds the liveness lock and reads the inbox until stop: it takes
// the lock again when its session ends, and it checks the session once a
// heartbeat period when nothing comes.
func (l *leases) listen(conn *pgx.Conn) {
	defer close(l.listenDone)
	for {
		if conn == nil {
			ctx, cancel := context.WithTimeout(l.stopCtx, l.p.QueryTimeout())
			c, err := l.relock(ctx)
			cancel()
			if err != nil {
				if l.stopCtx.Err() != nil {
					return
				}
				select {
				case <-l.stopCtx.Done():
					return
				case <-time.After(relockEvery):
				}
				continue
			}
			conn = c
			l.lockConn = c
			if l.lockless.Load() {
				return // no lock to keep, no inbox to read
			}
			l.p.Logger().Info("leases: liveness lock held")
		}
		ctx, cancel := context.WithTimeout(l.stopCtx, l.heartbeatEvery())
		n, err := conn.WaitForNotification(ctx)
		cancel()
		switch {
		case err == nil:
			l.handle(n.Payload)
			continue
		case l.stopCtx.Err() != nil:
			return
		case pgconn.Timeout(err) && !conn.IsClosed():
			ctx, cancel := context.WithTimeout(l.stopCtx, l.p.QueryTimeout())
			_, err = conn.Exec(ctx, `SELECT 1`)
			cancel()
			if err == nil {
				continue
			}
			if l.stopCtx.Err() != nil {
				return
			}
		}
		// The session ended: nothing more is admitted from the leases
		// until the lock is held again.
		l.locked.Store(false)
		_ = conn.Close(context.Background())
		conn, l.lockConn = nil, nil
		l.p.Logger().Warn("leases: the liveness lock's session ended; admitting nothing until it is held again", "error", err)
	}
}

// Inbox messages: "r ACCOUNT REPLY SEQ" asks the instance to give back
// what its leases of the account hold idle, then to answer "a SEQ" on the
// channel REPLY.
func (l *leases) handle(payload string) {
	f := strings.Fields(payload)
	switch {
	case len(f) == 4 && f[0] == "r":
		acct, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return
		}
		l.giving.Add(1)
		go func() {
			defer l.giving.Done()
			l.giveBack(acct, f[2], f[3])
		}()
	case len(f) == 2 && f[0] == "a":
		seq, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return
		}
		l.askMu.Lock()
		ch := l.asks[seq]
		l.askMu.Unlock()
		if ch != nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// giveBack answers a peer's request: it lowers the instance's leases of
// the account to what its calls in progress hold and what it has charged
// (see release), then answers.
func (l *leases) giveBack(accountID int64, reply, seq string) {
	ctx, cancel := context.WithTimeout(context.Background(), l.p.QueryTimeout())
	defer cancel()
	l.mu.Lock()
	a := l.accts[accountID]
	l.mu.Unlock()
	if a != nil {
		l.release(ctx, accountID, a, false)
	}
	if _, err := l.p.call.Exec(ctx, `SELECT pg_notify($1, $2)`, reply, "a "+seq); err != nil {
		l.p.Logger().Warn("leases: answering a peer's request for an idle slice failed", "account_id", accountID, "error", err)
	}
}

// askBack asks peers (by lock key) to give back what they hold of the
// account idle, and waits until they all answered, askWait passed, or ctx
// is done; and at least lockGrace when grace is set.
func (l *leases) askBack(ctx context.Context, accountID int64, peers []int64, grace bool) {
	var graceOver <-chan time.Time
	if grace {
		t := time.NewTimer(lockGrace)
		defer t.Stop()
		graceOver = t.C
	}
	var ch chan struct{}
	if len(peers) > 0 {
		seq := l.askSeq.Add(1)
		ch = make(chan struct{}, len(peers))
		l.askMu.Lock()
		l.asks[seq] = ch
		l.askMu.Unlock()
		defer func() {
			l.askMu.Lock()
			delete(l.asks, seq)
			l.askMu.Unlock()
		}()
		var b pgx.Batch
		msg := fmt.Sprintf("r %d %s %d", accountID, inboxOf(l.lockKey), seq)
		for _, k := range peers {
			b.Queue(`SELECT pg_notify($1, $2)`, inboxOf(k), msg)
		}
		if err := l.p.call.SendBatch(ctx, &b).Close(); err != nil {
			l.p.Logger().Warn("leases: asking peers for their idle slices failed", "account_id", accountID, "error", err)
			ch = nil
		}
	}
	timeout := time.NewTimer(askWait)
	defer timeout.Stop()
	for answered := 0; (ch != nil && answered < len(peers)) || graceOver != nil; {
		select {
		case <-ch:
			answered++
			if answered == len(peers) {
				ch = nil
			}
		case <-graceOver:
			graceOver = nil
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
