package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/storetest"
)

// waitChecked waits until db's authentication cache's last read of the
// count of key changes began at at: the read a call started beside it has
// finished.
func waitChecked(t *testing.T, db store.DB, at time.Time) {
	t.Helper()
	cache := db.(interface{ AuthCheckedAt() time.Time })
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cache.AuthCheckedAt().Equal(at) {
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
	forEachDB(t, func(t *testing.T, open storetest.Opener) {
		is := is.New(t)
		st, clock := newTestDB(t, open)
		ctx := context.Background()
		acct, k, secret := storetest.NewAccount(t, st, "acme", "")
		ttl := store.DefaultAuthCacheTTL

		_, err := st.Authenticate(ctx, secret)
		is.NoErr(err) // the count and the key read at t0
		t0 := clock.Now()

		// Changed in the database by hand (not through svcgw, so not
		// counted): a key used seldom is not read again, as long as the
		// count has not moved, for the whole of its life.
		storetest.Exec(t, st, `UPDATE api_keys SET name = 'renamed' WHERE id = ?`, k.ID)
		clock.Advance(5 * ttl)
		got, err := st.Authenticate(ctx, secret)
		is.NoErr(err)              // the count read again, unchanged…
		is.Equal(got.Name, k.Name) // …and the key not
		waitChecked(t, st, t0.Add(5*ttl))
		clock.Advance(store.AuthCacheLife - 5*ttl)
		got, err = st.Authenticate(ctx, secret)
		is.NoErr(err)
		is.Equal(got.Name, "renamed") // read again at the end of its life
		t1 := clock.Now()

		// In use: the count is read beside the calls once ¾ of the TTL
		// has passed, and none of them waits for it.
		clock.Advance(ttl * 3 / 4)
		_, err = st.Authenticate(ctx, secret)
		is.NoErr(err) // served; the count is read beside it
		waitChecked(t, st, t1.Add(ttl*3/4))

		// Revoked elsewhere at t1 + ¾TTL (counted): the next read of the
		// count, within a TTL, drops the cache.
		other := open(t, store.Options{Now: clock.Now})
		_, err = other.RevokeKey(ctx, k.ID)
		is.NoErr(err)
		clock.Advance(ttl * 3 / 4) // t1 + 1½TTL: ¾TTL since the last read of the count
		// This call reads the count beside it: it is served from the
		// cache, or, when that read is quicker than the call, refused.
		_, err = st.Authenticate(ctx, secret)
		is.True(err == nil || errors.Is(err, store.ErrNotFound)) // no other outcome
		waitChecked(t, st, t1.Add(ttl*3/2))
		_, err = st.Authenticate(ctx, secret)
		is.True(errors.Is(err, store.ErrNotFound)) // the count moved: the cache was dropped, the key read again

		// New limits set elsewhere are seen the same way.
		secret2, k2, err := st.CreateKey(ctx, acct.ID, "k2")
		is.NoErr(err)
		_, err = st.Authenticate(ctx, secret2)
		is.NoErr(err)
		rpm := int64(7)
		_, err = other.UpdateKeyLimits(ctx, k2.ID, func(l *store.KeyLimits) { l.RPM = &rpm })
		is.NoErr(err)
		clock.Advance(ttl)
		got, err = st.Authenticate(ctx, secret2)
		is.NoErr(err)
		is.True(got.Limits.RPM != nil && *got.Limits.RPM == 7) // seen within the TTL
	})
}
