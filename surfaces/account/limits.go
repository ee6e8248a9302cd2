package account

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// Limits bound the work of account requests, so that a flood of them
// degrades only the flooder: each key may have a few in progress, each for
// a bounded time. (The calls themselves read through a connection pool of
// their own in the store, so they never wait for these.)
type Limits struct {
	// PerKey is the most account requests (credits, usage, generation,
	// feedback) one API key may have in progress at once; past it a request
	// is refused at once with a 429 and Retry-After. 0 means DefaultPerKey.
	PerKey int
	// Timeout bounds one account request: a statement still running then
	// is interrupted, and the caller gets a 504. 0 means DefaultTimeout.
	Timeout time.Duration
}

// Defaults of Limits.
const (
	DefaultPerKey  = 4
	DefaultTimeout = 10 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.PerKey <= 0 {
		l.PerKey = DefaultPerKey
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
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
// the time limit on its context and the function that ends it, or writes
// the 429 and returns ok false.
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
	ctx, cancel := context.WithTimeoutCause(r.Context(), h.limits.Timeout, errTimeout)
	return r.WithContext(ctx), func() {
		cancel()
		f.mu.Lock()
		if f.n[caller.ID]--; f.n[caller.ID] == 0 {
			delete(f.n, caller.ID)
		}
		f.mu.Unlock()
	}, true
}

// timedOut reports whether r's account request ran out of its time.
func timedOut(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), errTimeout)
}
