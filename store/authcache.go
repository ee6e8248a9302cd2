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
// the request hot path does not read the database for every call. Revoking
// a key or changing its limits in this process clears it at once; the same
// change made by another process (the CLI, another instance) is seen
// within the TTL. Unknown keys are never cached.
//
// An entry past three quarters of its TTL is still used, but asks to be
// read again (get's refresh): the store reads it beside the calls, so a
// key in use is read before its entry expires (unless the read takes more
// than a quarter of the TTL) and no call waits for the read. A key in use
// is read about once per ¾ TTL; only a key unused for that long costs its
// next call a read.
type authCache struct {
	ttl time.Duration // <= 0: disabled
	mu  sync.RWMutex
	m   map[string]authEntry
	// epoch counts clears: a read that began before a clear must not put
	// back what the clear removed.
	epoch uint64
}

type authEntry struct {
	key Key
	at  time.Time // when the read of key began
}

// get returns the cached key of hash, and whether the entry is past three
// quarters of its TTL and wants reading again.
func (c *authCache) get(hash string, now time.Time) (k Key, ok, refresh bool) {
	if c.ttl <= 0 {
		return Key{}, false, false
	}
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	age := now.Sub(e.at)
	if !ok || age >= c.ttl || age < 0 {
		return Key{}, false, false
	}
	return e.key, true, age >= c.ttl-c.ttl/4
}

// begin is called before a read whose result goes to put: it returns the
// cache's epoch then.
func (c *authCache) begin() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// put caches k, read at now, unless the cache was cleared since epoch (from
// begin) or holds a newer read of the key.
func (c *authCache) put(hash string, k Key, now time.Time, epoch uint64) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if c.m == nil || len(c.m) >= maxAuthCache {
		c.m = make(map[string]authEntry)
	}
	if e, ok := c.m[hash]; ok && e.at.After(now) {
		return
	}
	c.m[hash] = authEntry{key: k, at: now}
}

// forget drops the entry of hash (a read found the key gone), unless the
// cache was cleared since epoch.
func (c *authCache) forget(hash string, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch == epoch {
		delete(c.m, hash)
	}
}

// clear forgets every entry (a key changed in this process).
func (c *authCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
	c.epoch++
}
