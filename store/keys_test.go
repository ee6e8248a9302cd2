package store

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/matryer/is"
)

var (
	keyIDPattern  = regexp.MustCompile(`^key_[0-9a-f]{16}$`)
	secretPattern = regexp.MustCompile(`^llm_live_[0-9A-Za-z]{40}$`)
)

func TestCreateKey(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		a, _, err := s.EnsureAccount(ctx, "acme")
		is.NoErr(err) // account

		secret, k, err := s.CreateKey(ctx, a.ID, "")
		is.NoErr(err)                              // create key
		is.True(secretPattern.MatchString(secret)) // secret format
		is.True(keyIDPattern.MatchString(k.ID))    // key id format
		is.Equal(k.Name, "default")                // default label
		is.Equal(k.AccountID, a.ID)                // account id
		is.Equal(k.AccountName, "acme")            // account name
		is.Equal(k.CreatedAt, clock.Now())         // created from the clock
		is.True(k.RevokedAt.IsZero())              // active

		secret2, k2, err := s.CreateKey(ctx, a.ID, "ci")
		is.NoErr(err)              // second key
		is.True(secret2 != secret) // distinct secrets
		is.True(k2.ID != k.ID)     // distinct ids
		is.Equal(k2.Name, "ci")    // label

		_, _, err = s.CreateKey(ctx, 999, "x")
		is.True(errors.Is(err, ErrNotFound)) // unknown account
		_, _, err = s.CreateKey(ctx, a.ID, " padded")
		is.True(errors.Is(err, ErrInvalid)) // bad label
	})
}

func TestAuthenticate(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		a, k, secret := newAccount(t, s, "acme", "")
		_, revoked, revokedSecret := func() (Account, Key, string) {
			sec, k, err := s.CreateKey(ctx, a.ID, "old")
			if err != nil {
				t.Fatal(err)
			}
			return a, k, sec
		}()
		clock.Advance(time.Minute)
		rk, err := s.RevokeKey(ctx, revoked.ID)
		if err != nil {
			t.Fatalf("revoke: %v", err)
		}

		tests := []struct {
			name   string
			secret string
			want   string // key id, or "" for ErrNotFound
		}{
			{"active key", secret, k.ID},
			{"revoked key", revokedSecret, ""},
			{"unknown key", "llm_live_" + "0000000000000000000000000000000000000000", ""},
			{"wrong prefix", "sk-" + secret[len(SecretPrefix):], ""},
			{"empty", "", ""},
			{"key id is not a secret", k.ID, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				is := is.New(t)
				got, err := s.Authenticate(ctx, tt.secret)
				if tt.want == "" {
					is.True(errors.Is(err, ErrNotFound)) // not authenticated
					return
				}
				is.NoErr(err)                     // authenticated
				is.Equal(got.ID, tt.want)         // the right key
				is.Equal(got.AccountName, "acme") // with its account
			})
		}

		is := is.New(t)
		is.Equal(rk.RevokedAt, clock.Now()) // revoked at the clock's time
		clock.Advance(time.Minute)
		again, err := s.RevokeKey(ctx, revoked.ID)
		is.NoErr(err)                           // revoking twice is fine
		is.Equal(again.RevokedAt, rk.RevokedAt) // and keeps the first time
		_, err = s.RevokeKey(ctx, "key_0000000000000000")
		is.True(errors.Is(err, ErrNotFound)) // unknown key id
	})
}

func TestListKeys(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		s, clock := newTestDB(t, open)
		ctx := context.Background()
		a, k1, _ := newAccount(t, s, "acme", "")
		clock.Advance(time.Second)
		b, k2, _ := newAccount(t, s, "beta", "")
		clock.Advance(time.Second)
		_, k3, err := s.CreateKey(ctx, a.ID, "second")
		is.NoErr(err) // third key

		ids := func(ks []Key) []string {
			var out []string
			for _, k := range ks {
				out = append(out, k.ID)
			}
			return out
		}
		all, err := s.ListKeys(ctx, 0)
		is.NoErr(err)                                     // list all
		is.Equal(ids(all), []string{k1.ID, k2.ID, k3.ID}) // every account, oldest first
		acme, err := s.ListKeys(ctx, a.ID)
		is.NoErr(err)                               // list acme
		is.Equal(ids(acme), []string{k1.ID, k3.ID}) // only acme's
		beta, err := s.ListKeys(ctx, b.ID)
		is.NoErr(err)                        // list beta
		is.Equal(ids(beta), []string{k2.ID}) // only beta's
		none, err := s.ListKeys(ctx, 999)
		is.NoErr(err)          // list unknown account
		is.Equal(len(none), 0) // nothing
	})
}

func TestNewSecret_Uniform(t *testing.T) {
	is := is.New(t)
	s, _ := newTestStore(t)
	counts := map[rune]int{}
	for range 500 {
		sec, err := newSecret(s.rand)
		is.NoErr(err) // secret
		for _, r := range sec[len(SecretPrefix):] {
			counts[r]++
		}
	}
	is.Equal(len(counts), 62) // every base62 character appears
	for r, n := range counts {
		// 20000 draws over 62 symbols: about 323 each.
		if n < 200 || n > 450 {
			t.Errorf("character %q drawn %d times", r, n)
		}
	}
}

func TestAuthenticate_CacheSeesOtherProcessesWithinTTL(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		st, clock := newTestDB(t, open)
		ctx := context.Background()
		acct, _, err := st.EnsureAccount(ctx, "acme")
		is.NoErr(err)
		secret, k, err := st.CreateKey(ctx, acct.ID, "k")
		is.NoErr(err)
		_, err = st.Authenticate(ctx, secret)
		is.NoErr(err) // cached now

		// Another process (a second store on the same database, as the
		// CLI or another instance is) revokes the key: this store
		// trusts its cache until the TTL passes.
		other := open(t, Options{Now: clock.Now})
		_, err = other.RevokeKey(ctx, k.ID)
		is.NoErr(err)
		_, err = st.Authenticate(ctx, secret)
		is.NoErr(err) // still within the TTL
		clock.Advance(DefaultAuthCacheTTL)
		_, err = st.Authenticate(ctx, secret)
		is.True(errors.Is(err, ErrNotFound)) // revocation seen after the TTL

		// A revocation in this process takes effect at once.
		secret2, k2, err := st.CreateKey(ctx, acct.ID, "k2")
		is.NoErr(err)
		_, err = st.Authenticate(ctx, secret2)
		is.NoErr(err)
		_, err = st.RevokeKey(ctx, k2.ID)
		is.NoErr(err)
		_, err = st.Authenticate(ctx, secret2)
		is.True(errors.Is(err, ErrNotFound)) // no stale cache
	})
}

// authCacheOf is db's authentication cache.
func authCacheOf(db DB) *authCache {
	switch db := db.(type) {
	case *Store:
		return &db.auth
	case *Postgres:
		return &db.auth
	}
	panic("unknown store")
}

// waitChecked waits until the cache's last read of the count of key
// changes began at at: the read a call started beside it has finished.
func waitChecked(t *testing.T, c *authCache, at time.Time) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.RLock()
		checked := c.checked
		c.mu.RUnlock()
		if checked.Equal(at) {
			return
		}
	}
	t.Fatalf("the count of key changes was not read at %v", at)
}

// A key is read once per authCacheLife however seldom it is used: what
// is read once per TTL, beside the calls, is the count of key changes,
// and a change made elsewhere is still seen within the TTL of when it was
// made.
func TestAuthenticate_ReadsTheChangeCountNotTheKey(t *testing.T) {
	forEachDB(t, func(t *testing.T, open opener) {
		is := is.New(t)
		st, clock := newTestDB(t, open)
		ctx := context.Background()
		acct, k, secret := newAccount(t, st, "acme", "")
		cache := authCacheOf(st)
		ttl := DefaultAuthCacheTTL

		_, err := st.Authenticate(ctx, secret)
		is.NoErr(err) // the count and the key read at t0
		t0 := clock.Now()

		// Changed in the database by hand (not through svcgw, so not
		// counted): a key used seldom is not read again, as long as the
		// count has not moved, for the whole of its life.
		execSQL(t, st, `UPDATE api_keys SET name = 'renamed' WHERE id = ?`, k.ID)
		clock.Advance(5 * ttl)
		got, err := st.Authenticate(ctx, secret)
		is.NoErr(err)              // the count read again, unchanged…
		is.Equal(got.Name, k.Name) // …and the key not
		waitChecked(t, cache, t0.Add(5*ttl))
		clock.Advance(authCacheLife - 5*ttl)
		got, err = st.Authenticate(ctx, secret)
		is.NoErr(err)
		is.Equal(got.Name, "renamed") // read again at the end of its life
		t1 := clock.Now()

		// In use: the count is read beside the calls once ¾ of the TTL
		// has passed, and none of them waits for it.
		clock.Advance(ttl * 3 / 4)
		_, err = st.Authenticate(ctx, secret)
		is.NoErr(err) // served; the count is read beside it
		waitChecked(t, cache, t1.Add(ttl*3/4))

		// Revoked elsewhere at t1 + ¾TTL (counted): the next read of the
		// count, within a TTL, drops the cache.
		other := open(t, Options{Now: clock.Now})
		_, err = other.RevokeKey(ctx, k.ID)
		is.NoErr(err)
		clock.Advance(ttl * 3 / 4) // t1 + 1½TTL: ¾TTL since the last read of the count
		// This call reads the count beside it: it is served from the
		// cache, or, when that read is quicker than the call, refused.
		_, err = st.Authenticate(ctx, secret)
		is.True(err == nil || errors.Is(err, ErrNotFound)) // no other outcome
		waitChecked(t, cache, t1.Add(ttl*3/2))
		_, err = st.Authenticate(ctx, secret)
		is.True(errors.Is(err, ErrNotFound)) // the count moved: the cache was dropped, the key read again

		// New limits set elsewhere are seen the same way.
		secret2, k2, err := st.CreateKey(ctx, acct.ID, "k2")
		is.NoErr(err)
		_, err = st.Authenticate(ctx, secret2)
		is.NoErr(err)
		rpm := int64(7)
		_, err = other.UpdateKeyLimits(ctx, k2.ID, func(l *KeyLimits) { l.RPM = &rpm })
		is.NoErr(err)
		clock.Advance(ttl)
		got, err = st.Authenticate(ctx, secret2)
		is.NoErr(err)
		is.True(got.Limits.RPM != nil && *got.Limits.RPM == 7) // seen within the TTL
	})
}
