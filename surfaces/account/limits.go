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
}

// Defaults of Limits.
const (
	DefaultPerKey  = 4
	DefaultTimeout = 10 * time.Second
	DefaultShare   = 0.25
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
// request has its turn (Limits.Concurrent); or it writes the 429 (too many
// of the key's requests in progress) or the 504 (no turn within the time
// limit) and returns ok false.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, caller store.Key) (_ *http.Request, end func(), ok bool) {
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
	served := time.Now()
	return r, func() {
		cancel()
		leave()
		rest := min(time.Duration(float64(time.Since(served))*(1/h.limits.Share-1)), MaxRest)
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
