package account

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/svcgw/svcgw/store"
)

// What a flood of account reads costs the calls is mostly not the reads'
// own queries: each read first waits for the ledger to commit what was
// recorded before it (store.DB.Sync), and under call load every such Sync
// forces a commit of a batch the ledger writer would otherwise have kept
// collecting, so a flood of reads turns the writer's few large commits into
// many small ones on the calls' cores. The code here shares that work among
// reads without making any answer staler than a read of its own would be:
//
//   - syncGate lets reads wait for the ledger writer's own next commit,
//     asking for one only when none has come within Limits.SyncEvery;
//   - usageCache keeps usage answers across ledger commits, adding each
//     commit's sums to them instead of running their queries again, and
//     answers identical usage reads with the same bytes, computed once
//     (concurrent ones wait for the one running: singleflight);
//   - keyBudget bounds the time each key's account requests take (429).

// syncGate shares the Syncs of account reads. A read joins the next round
// that has not started yet, so the round waits for everything recorded
// before the read arrived: the read sees what it would have seen with a
// Sync of its own. A round leaves the ledger writer up to every to commit
// on its own (it does at least every batch interval under load) before it
// asks for a commit (store.DB.SyncWithin). Rounds start at most every
// apart, the reads arriving meanwhile sharing the next. So a flood of
// reads adds at most one ledger commit per every, and under steady call
// load hardly any, while a read alone, or on an idle ledger, never waits.
type syncGate struct {
	st     store.DB
	every  time.Duration
	settle time.Duration // how long a round's reads wait after its commit (Limits.Settle)
	limit  time.Duration // the most a round's Sync may take: longer than a read's own limit

	mu   sync.Mutex
	next *syncRound // the round reads join; nil when none is pending
	last time.Time  // when the last round started
}

// syncRound is one shared Sync: done is closed when err is set.
type syncRound struct {
	done chan struct{}
	err  error
}

// sync returns once everything recorded before the call is committed, as
// store.DB.Sync does, or ctx ends.
func (g *syncGate) sync(ctx context.Context) error {
	if g.st == nil || g.st.LedgerStats().Pending == 0 {
		return nil // what Sync would do at once: nothing to wait for
	}
	g.mu.Lock()
	rd := g.next
	if rd == nil {
		rd = &syncRound{done: make(chan struct{})}
		g.next = rd
		go g.run(rd, time.Until(g.last.Add(g.every)))
	}
	g.mu.Unlock()
	select {
	case <-rd.done:
		if rd.err != nil && ctx.Err() != nil {
			break // say the read's own end
		}
		return rd.err
	case <-ctx.Done():
	}
	return fmt.Errorf("sync: %w", context.Cause(ctx))
}

// run starts rd after wait: from then on later reads join a new round.
// Its Sync is bounded by the gate's limit rather than one read's context,
// since every read of the round waits for it; each read stops waiting at
// its own limit, which is shorter.
func (g *syncGate) run(rd *syncRound, wait time.Duration) {
	if wait > 0 {
		time.Sleep(wait)
	}
	g.mu.Lock()
	g.next = nil
	g.last = time.Now()
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), g.limit)
	defer cancel()
	rd.err = g.st.SyncWithin(ctx, g.every)
	if rd.err == nil && g.settle > 0 {
		// The calls that arrived while the commit held the core queued
		// behind it; they go first (Limits.Settle).
		time.Sleep(g.settle)
	}
	close(rd.done)
}

// keyBudget is each API key's budget of account-request time: a bucket
// per key that holds up to burst of it and refills at rate (seconds per
// second). A request is let in while its key's bucket is not empty, and
// the time it was served (from its turn to its answer; its wait for the
// ledger's commit comes before its turn) is taken out when it ends, so the bucket can go
// below zero: the key's next request waits until it has refilled. The
// cost is what the request took, so a cheap read (a cached answer, a
// generation by id) takes little and a slow report much.
type keyBudget struct {
	rate  float64 // seconds of service per second
	burst float64 // seconds

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	left float64 // seconds; may be negative
	at   time.Time
}

// budgetPrune is how many keys' buckets are kept before the full ones
// (keys idle for a while) are forgotten.
const budgetPrune = 4096

// refill brings key's bucket to now, making it if it is new.
func (b *keyBudget) refill(key string, now time.Time) *bucket {
	k := b.buckets[key]
	if k == nil {
		if len(b.buckets) >= budgetPrune {
			b.prune(now)
		}
		if b.buckets == nil {
			b.buckets = make(map[string]*bucket)
		}
		k = &bucket{left: b.burst, at: now}
		b.buckets[key] = k
	}
	if d := now.Sub(k.at); d > 0 {
		k.left = min(b.burst, k.left+d.Seconds()*b.rate)
		k.at = now
	}
	return k
}

// admit reports whether key may make a request now, or how long until it
// may.
func (b *keyBudget) admit(key string, now time.Time) (wait time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.refill(key, now)
	if k.left > 0 {
		return 0, true
	}
	return time.Duration(-k.left/b.rate*float64(time.Second)) + time.Millisecond, false
}

// charge takes the time d a request of key was served out of its bucket.
func (b *keyBudget) charge(key string, d time.Duration, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(key, now).left -= d.Seconds()
}

// prune forgets the buckets that have refilled: a new one starts full.
func (b *keyBudget) prune(now time.Time) {
	for key, k := range b.buckets {
		if k.left+now.Sub(k.at).Seconds()*b.rate >= b.burst {
			delete(b.buckets, key)
		}
	}
}
