package store

import (
	"sync"
	"time"
)

// DefaultAuthCacheTTL is how long an authenticated key is trusted without
// reading the database again (Options.AuthCacheTTL).
const DefaultAuthCacheTTL = time.Second

// maxAuthCache bounds the cache; past it the cache starts over.
const maxAuthCache = 10000

// authCache remembers recent successful authentications by secret hash, so
// the request hot path does not read SQLite for every call. Revoking a key
// or changing its limits in this process clears it at once; the same
// change made by another process (the CLI) is seen within the TTL. Unknown
// keys are never cached.
type authCache struct {
	ttl time.Duration // <= 0: disabled
	mu  sync.RWMutex
	m   map[string]authEntry
}

type authEntry struct {
	key Key
	at  time.Time
}

func (c *authCache) get(hash string, now time.Time) (Key, bool) {
	if c.ttl <= 0 {
		return Key{}, false
	}
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	if !ok || now.Sub(e.at) >= c.ttl || now.Before(e.at) {
		return Key{}, false
	}
	return e.key, true
}

func (c *authCache) put(hash string, k Key, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxAuthCache {
		c.m = make(map[string]authEntry)
	}
	c.m[hash] = authEntry{key: k, at: now}
}

// clear forgets every entry (a key changed in this process).
func (c *authCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
