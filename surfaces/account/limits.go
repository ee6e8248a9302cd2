package account

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// Limits bound the work of account requests, so that a flood of them
// degrades only the flooder: each key may have a few in progress, all keys
// together may keep only some of the process's cores busy, and each request
// has a bounded time. (The calls themselves read through a connection pool
// of their own in the store, so they never wait for these.)
type Limits struct {
	// PerKey is the most account requests (credits, usage, generation,
	// feedback) one API key may have in progress at once; past it a request
	// is refused at once with a 429 and Retry-After. 0 means DefaultPerKey.
	PerKey int
	// Timeout bounds one account request, its wait for a turn included: a
	// statement still running then is interrupted, and the caller gets a
	// 504. 0 means DefaultTimeout.
	Timeout time.Duration
	// Concurrent is how many account requests of all keys are served at
	// once; the others wait their turn, first come first served. 0 means
	// half of GOMAXPROCS, at least one: the calls always have the other
	// cores.
	Concurrent int
	// Share is the most of its time a turn spends serving while requests
	// wait for one: after a request that took d, if others are waiting, its
	// turn rests d×(1/Share − 1), at most MaxRest, before the next may have
	// it. So however many keys flood them, account requests keep at most
	// Concurrent×Share cores busy, and calls on the same cores are delayed
	// by them only that fraction of the time; requests that do not queue
	// never wait. 0 means DefaultShare; 1 means no rest.
	Share float64
	// Time and Burst are each key's budget of account-request time: what
	// its requests took, from their turn to their answer, may add up to Time per second on average
	// and to Burst at once. Past it a request is refused at once with a
	// 429 and a Retry-After saying when the key's budget will have refilled
	// (see keyBudget). A cached answer or a generation looked up by id
	// takes well under a millisecond, a usage report over years a few, so
	// an ordinary client never meets the budget and a flooder is held to
	// Time per second. Each key of an account has a budget of its own: a
	// key flooding the account endpoints leaves the account's other keys
	// theirs. 0 means DefaultTime and DefaultBurst.
	Time, Burst time.Duration
	// SyncEvery bounds how long an account read waits for the ledger
	// writer's own commit of the calls recorded before it; then it forces
	// one (store.DB.Sync), the reads arriving meanwhile sharing it (see
	// syncGate). So account reads force at most one commit per SyncEvery.
	// 0 means DefaultSyncEvery; a negative value means every read forces
	// its own at once, as Sync alone does.
	SyncEvery time.Duration
	// Settle is how long the reads that waited for a ledger commit wait
	// after it before they start. The calls that arrived while the commit
	// held the process's cores queued behind it, and the commit releases
	// every read waiting for it at once: without a pause, a flood of
	// reads would land on those cores right when the calls most need
	// them. A read waits for a commit only while calls are being recorded,
	// so on a gateway without calls it never pays this. 0 means
	// DefaultSettle; a negative value means none.
	Settle time.Duration
}

// Defaults of Limits.
const (
	DefaultPerKey  = 4
	DefaultTimeout = 10 * time.Second
	DefaultShare   = 0.25
	// DefaultTime and DefaultBurst: a tenth of a core per key, and a
	// second at once.
	DefaultTime  = 100 * time.Millisecond
	DefaultBurst = time.Second
	// DefaultSyncEvery is the ledger's own default batch interval
	// (store.Options.BatchInterval), within which the
	// writer commits on its own whenever calls are being recorded.
	DefaultSyncEvery = 20 * time.Millisecond
	// DefaultSettle: a commit of a busy many-key ledger takes a few
	// milliseconds of CPU (bench/RESULTS.md), and a read that waited for
	// it has waited ~10 ms on average already.
	DefaultSettle = 3 * time.Millisecond
	// MaxRest bounds a turn's rest, so that one slow request (a report
	// while the roll-ups of an upgraded database are still being built)
	// does not hold up the next for long.
	MaxRest = time.Second
)

func (l Limits) withDefaults() Limits {
	if l.PerKey <= 0 {
		l.PerKey = DefaultPerKey
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.Concurrent <= 0 {
		l.Concurrent = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if l.Share <= 0 || l.Share > 1 {
		l.Share = DefaultShare
	}
	if l.Time <= 0 {
		l.Time = DefaultTime
	}
	if l.Burst <= 0 {
		l.Burst = DefaultBurst
	}
	switch {
	case l.Settle == 0:
		l.Settle = DefaultSettle
	case l.Settle < 0:
		l.Settle = 0
	}
	switch {
	case l.SyncEvery == 0:
		l.SyncEvery = DefaultSyncEvery
	case l.SyncEvery < 0:
		l.SyncEvery = 0
	}
	return l
}

// inflight counts the account requests in progress per key.
type inflight struct {
	mu sync.Mutex
	n  map[string]int // no zero entries
}

// errTimeout is the cause of an account request's own deadline.
var errTimeout = errors.New("account request timeout")

// begin admits an account request of caller: it returns the request with
// the time limit on its context and the function that ends it, once the
// calls recorded before the request are committed (syncGate) and the
// request has its turn (Limits.Concurrent); or it writes the 429 (the
// key's budget of account-request time spent, or too many of its requests
// in progress), the 504 (not admitted within the time limit) or the 503
// (the ledger cannot commit) and returns ok false.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, caller store.Key) (_ *http.Request, end func(), ok bool) {
	// The reads' budget; feedback, a write, counts against the key's
	// requests per minute instead (the server's).
	read := r.Method == http.MethodGet
	if read {
		if wait, ok := h.budget.admit(caller.ID, time.Now()); !ok {
			h.writeErr(w, r, &llm.Error{
				Kind: llm.KindRateLimited,
				Message: fmt.Sprintf("This API key's account requests have taken more than %s a second of the gateway's time, "+
					"the most they may take (%s at once); retry after the time Retry-After gives.", h.limits.Time, h.limits.Burst),
				RetryAfter: wait,
			})
			return r, nil, false
		}
	}
	f := &h.inflight
	f.mu.Lock()
	if f.n[caller.ID] >= h.limits.PerKey {
		f.mu.Unlock()
		h.writeErr(w, r, &llm.Error{
			Kind: llm.KindRateLimited,
			Message: fmt.Sprintf("This API key already has %d account requests in progress, the most it may have at once; "+
				"retry when one has finished.", h.limits.PerKey),
			RetryAfter: time.Second,
		})
		return r, nil, false
	}
	if f.n == nil {
		f.n = make(map[string]int)
	}
	f.n[caller.ID]++
	f.mu.Unlock()
	leave := func() {
		f.mu.Lock()
		if f.n[caller.ID]--; f.n[caller.ID] == 0 {
			delete(f.n, caller.ID)
		}
		f.mu.Unlock()
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), h.limits.Timeout, errTimeout)
	r = r.WithContext(ctx)
	// Every account request reads (or, for feedback, checks) the calls
	// recorded before it: it waits for their commit first, before its
	// turn, since waiting costs the process nothing (see syncGate).
	if err := h.gate.sync(ctx); err != nil {
		leave()
		h.internal(w, r, fmt.Errorf("account request: %w", err))
		cancel()
		return r, nil, false
	}
	select {
	case h.turns <- struct{}{}: // a free turn
	default:
		h.waiting.Add(1)
		select {
		case h.turns <- struct{}{}:
			h.waiting.Add(-1)
		case <-ctx.Done():
			h.waiting.Add(-1)
			leave()
			h.internal(w, r, fmt.Errorf("account request: waiting for a turn: %w", context.Cause(ctx)))
			cancel()
			return r, nil, false
		}
	}
	began := time.Now()
	return r, func() {
		cancel()
		leave()
		took := time.Since(began)
		if read {
			h.budget.charge(caller.ID, took, time.Now())
		}
		rest := min(time.Duration(float64(took)*(1/h.limits.Share-1)), MaxRest)
		if rest <= 0 || h.waiting.Load() == 0 {
			<-h.turns
			return
		}
		time.AfterFunc(rest, func() { <-h.turns })
	}, true
}

// timedOut reports whether r's account request ran out of its time.
func timedOut(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), errTimeout)
}
