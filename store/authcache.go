package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultAuthCacheTTL is how long a change to a key made by another
// process (the CLI, another instance) may take to be seen: the window
// within which every serving process reads the count of key changes
// (Options.AuthCacheTTL).
const DefaultAuthCacheTTL = time.Second

// authCacheLife is how long a cached key is trusted at most, whatever the
// count of key changes says: a key changed in the database by hand, not
// through svcgw (which counts every change), is seen within it.
const authCacheLife = time.Minute

// maxAuthCache bounds the cache; past it the cache starts over.
const maxAuthCache = 10000

// authCache remembers recent successful authentications by secret hash, so
// the request hot path does not read the database for every call. Revoking
// a key or changing its limits in this process clears it at once. Such a
// change made by another process (the CLI, another instance) adds one to
// the database's count of key changes (table key_changes) in its own
// transaction; the store reads that count at least once per ttl while
// calls come (check, observe) and clears the cache when it has moved, so
// the change is seen within the ttl, while a key in use is read only once
// per authCacheLife, however seldom it is used. Unknown keys are never
// cached.
//
// The count is read beside the calls once three quarters of the ttl have
// passed since the last read (fresh's soon), so in steady state no call
// waits for it; a call finding it older than the ttl (the first after a
// quiet second) waits for one read of it. Likewise an entry past three
// quarters of its life is still used but asks to be read again (get's
// refresh).
type authCache struct {
	ttl time.Duration // <= 0: disabled
	mu  sync.RWMutex
	m   map[string]authEntry
	// epoch counts clears: a read that began before a clear must not put
	// back what the clear removed.
	epoch uint64
	// The count of key changes last read (seen), and when that read
	// began (checked); known is false until the first.
	seen    int64
	checked time.Time
	known   bool
}

type authEntry struct {
	key Key
	at  time.Time // when the read of key began
}

// fresh reports whether the count of key changes was read within the ttl
// before now (so the cache may be trusted), and whether it is time to read
// it again beside the calls (soon).
func (c *authCache) fresh(now time.Time) (ok, soon bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	age := now.Sub(c.checked)
	if !c.known || age >= c.ttl || age < 0 {
		return false, false
	}
	return true, age >= c.ttl-c.ttl/4
}

// observe records n, the count of key changes read by a read that began at
// at: the cache is cleared when the count has moved since the last read.
func (c *authCache) observe(n int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && n != c.seen {
		c.m = nil
		c.epoch++
	}
	c.seen, c.known = n, true
	if at.After(c.checked) {
		c.checked = at
	}
}

// get returns the cached key of hash, and whether the entry is past three
// quarters of its life and wants reading again. The caller has checked
// that the cache may be trusted (fresh).
func (c *authCache) get(hash string, now time.Time) (k Key, ok, refresh bool) {
	if c.ttl <= 0 {
		return Key{}, false, false
	}
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	age := now.Sub(e.at)
	if !ok || age >= authCacheLife || age < 0 {
		return Key{}, false, false
	}
	return e.key, true, age >= authCacheLife-authCacheLife/4
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

// Authenticate returns the active key whose secret is secret. An unknown or
// revoked secret is ErrNotFound, without saying which; a key past its
// expiry is an *ExpiredError (ErrExpired). This is the hot path
// of every request: one indexed read on the call path's pool, bounded by
// QueryTimeout (ErrUnavailable past it), unless the key is cached.
func (s *Policy) Authenticate(ctx context.Context, secret string) (Key, error) {
	if !strings.HasPrefix(secret, SecretPrefix) {
		return Key{}, fmt.Errorf("authenticate: %w", ErrNotFound)
	}
	hash := hashSecret(secret)
	now := s.now()
	if err := s.checkKeyChanges(ctx, now); err != nil {
		return Key{}, err
	}
	if k, ok, refresh := s.auth.get(hash, now); ok {
		if refresh {
			// Read it again beside the calls, before the entry
			// expires (see authCache).
			s.authReads.DoChan(hash, func() (any, error) { return s.readKey(context.Background(), hash) })
		}
		return unexpired(k, now)
	}
	// The calls that find a key's entry expired at once share one read:
	// a busy key would otherwise send every call in flight to the
	// database each time its entry expires.
	v, err, _ := s.authReads.Do(hash, func() (any, error) { return s.readKey(context.WithoutCancel(ctx), hash) })
	if err != nil {
		return Key{}, err
	}
	return unexpired(v.(Key), now)
}

// unexpired returns k, or ErrExpired when it has expired by now. The
// expiry is checked on every call, cached key or not, so a key stops at
// its time on every instance.
func unexpired(k Key, now time.Time) (Key, error) {
	if e := k.Limits.ExpiresAt; e != nil && !now.Before(*e) {
		return Key{}, &ExpiredError{KeyID: k.ID, At: *e}
	}
	return k, nil
}

// ExpiredError is Authenticate's refusal of a key past its expiry; it
// matches ErrExpired.
type ExpiredError struct {
	KeyID string
	At    time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("authenticate: key %s expired at %s", e.KeyID, e.At.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrExpired) true.
func (e *ExpiredError) Is(target error) bool { return target == ErrExpired }

// ErrExpired means an API key is past its expiry (KeyLimits.ExpiresAt).
var ErrExpired = errors.New("key expired")

// keyChangesFlight is the authReads key of the read of the count of key
// changes (a secret's hash is hex: no secret's reads share it).
const keyChangesFlight = "key_changes"

// checkKeyChanges makes sure the count of key changes was read within the
// cache's ttl before now, so that its entries may be trusted: when it was
// not, the call waits for one read of it (shared by the calls waiting
// then); once three quarters of the ttl have passed, it is read again
// beside the calls.
func (s *Policy) checkKeyChanges(ctx context.Context, now time.Time) error {
	if s.auth.ttl <= 0 {
		return nil // no cache: every call reads its key
	}
	ok, soon := s.auth.fresh(now)
	switch {
	case !ok:
		_, err, _ := s.authReads.Do(keyChangesFlight, func() (any, error) { return nil, s.readKeyChanges(context.WithoutCancel(ctx)) })
		if err != nil {
			return fmt.Errorf("authenticate: %w", err)
		}
	case soon:
		s.authReads.DoChan(keyChangesFlight, func() (any, error) { return nil, s.readKeyChanges(context.Background()) })
	}
	return nil
}

// readKeyChanges reads the count of key changes into the cache.
func (s *Policy) readKeyChanges(ctx context.Context) error {
	at := s.now()
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	n, err := s.db.KeyChanges(ctx)
	if err != nil {
		return fmt.Errorf("read key changes: %w", err)
	}
	s.auth.observe(n, at)
	return nil
}

// readKey reads the active key whose secret hashes to hash into the cache.
func (s *Policy) readKey(ctx context.Context, hash string) (Key, error) {
	now, epoch := s.now(), s.auth.begin()
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	k, err := s.db.ActiveKey(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		s.auth.forget(hash, epoch)
		return Key{}, fmt.Errorf("authenticate: %w", ErrNotFound)
	}
	if err != nil {
		return Key{}, fmt.Errorf("authenticate: %w", err)
	}
	s.auth.put(hash, k, now, epoch)
	return k, nil
}
