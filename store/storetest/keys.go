package storetest

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
)

var (
	keyIDPattern  = regexp.MustCompile(`^key_[0-9a-f]{16}$`)
	secretPattern = regexp.MustCompile(`^llm_live_[0-9A-Za-z]{40}$`)
)

func testCreateKey(t *testing.T, open Opener) {
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
	is.True(errors.Is(err, store.ErrNotFound)) // unknown account
	_, _, err = s.CreateKey(ctx, a.ID, " padded")
	is.True(errors.Is(err, store.ErrInvalid)) // bad label
}

func testAuthenticate(t *testing.T, open Opener) {
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k, secret := NewAccount(t, s, "acme", "")
	_, revoked, revokedSecret := func() (store.Account, store.Key, string) {
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
		{"wrong prefix", "sk-" + secret[len(store.SecretPrefix):], ""},
		{"empty", "", ""},
		{"key id is not a secret", k.ID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got, err := s.Authenticate(ctx, tt.secret)
			if tt.want == "" {
				is.True(errors.Is(err, store.ErrNotFound)) // not authenticated
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
	is.True(errors.Is(err, store.ErrNotFound)) // unknown key id
}

func testListKeys(t *testing.T, open Opener) {
	is := is.New(t)
	s, clock := newTestDB(t, open)
	ctx := context.Background()
	a, k1, _ := NewAccount(t, s, "acme", "")
	clock.Advance(time.Second)
	b, k2, _ := NewAccount(t, s, "beta", "")
	clock.Advance(time.Second)
	_, k3, err := s.CreateKey(ctx, a.ID, "second")
	is.NoErr(err) // third key

	ids := func(ks []store.Key) []string {
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
}

func testAuthenticate_CacheSeesOtherProcessesWithinTTL(t *testing.T, open Opener) {
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
	other := open(t, store.Options{Now: clock.Now})
	_, err = other.RevokeKey(ctx, k.ID)
	is.NoErr(err)
	_, err = st.Authenticate(ctx, secret)
	is.NoErr(err) // still within the TTL
	clock.Advance(store.DefaultAuthCacheTTL)
	_, err = st.Authenticate(ctx, secret)
	is.True(errors.Is(err, store.ErrNotFound)) // revocation seen after the TTL

	// A revocation in this process takes effect at once.
	secret2, k2, err := st.CreateKey(ctx, acct.ID, "k2")
	is.NoErr(err)
	_, err = st.Authenticate(ctx, secret2)
	is.NoErr(err)
	_, err = st.RevokeKey(ctx, k2.ID)
	is.NoErr(err)
	_, err = st.Authenticate(ctx, secret2)
	is.True(errors.Is(err, store.ErrNotFound)) // no stale cache
}
