package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

// setAccountLimits sets the requests and tokens per minute (nil: none) of
// the account called name, as PATCH /admin/v1/accounts/{name} does.
func (gw *testGateway) setAccountLimits(t *testing.T, name string, rpm, tpm *int64) {
	t.Helper()
	ctx := context.Background()
	a, err := gw.Store.AccountByName(ctx, name)
	if err != nil {
		t.Fatalf("account: %v", err)
	}
	if _, err := gw.Store.UpdateAccountCaps(ctx, a.ID, func(c *store.Caps) { c.RPM, c.TPM = rpm, tpm }); err != nil {
		t.Fatalf("update caps: %v", err)
	}
}

// An account's requests per minute are shared by all of its keys: once
// its keys together have made that many calls, each of them is refused
// with a 429 in its caller's own envelope, whatever the key's own limit,
// while other accounts' keys go on.
func TestRateLimit_AccountRequestsPerMinuteAcrossItsKeys(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock), func(o *Options) { o.RPM = 100 }) // each key's own: far above
	for _, r := range rateSurfaces {
		t.Run(r.surface, func(t *testing.T) {
			is := is.New(t)
			account := "team-" + r.surface
			first, _ := gw.newKey(t, account, "10")
			second, _ := gw.newKey(t, account, "")
			rpm := int64(3)
			gw.setAccountLimits(t, account, &rpm, nil)
			outsider, _ := gw.newKey(t, "outsider-"+r.surface, "10")

			for i, key := range []string{first, second, first} {
				resp, out, err := gw.post(r.path, key, r.body)
				is.NoErr(err)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("call %d: %d %s", i, resp.StatusCode, out) // within the account's 3 per minute
				}
			}
			for _, key := range []string{second, first} {
				resp, out, err := gw.post(r.path, key, r.body)
				is.NoErr(err)
				is.Equal(resp.StatusCode, http.StatusTooManyRequests) // the account's fourth in the minute, on either key
				surface, typ := envelopeKind(t, out)
				is.Equal(surface, r.surface) // the caller's own envelope
				is.True(strings.Contains(string(out), "this account allows 3 requests per minute"))
				is.Equal(resp.Header.Get("Retry-After"), "20") // a request's worth refills in 20s
				switch r.surface {
				case "chat":
					is.Equal(typ, "requests")
					is.True(strings.Contains(string(out), `"rate_limit_exceeded"`))
				case "messages":
					is.Equal(typ, "rate_limit_error")
				case "gencontent":
					is.Equal(typ, "RESOURCE_EXHAUSTED")
					is.True(strings.Contains(string(out), `"retryDelay":"20s"`))
				}
			}
			// Count-tokens endpoints take from the account's requests too.
			cresp, _, err := gw.post("/svc/v1/messages/count_tokens", second, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			is.NoErr(err)
			is.Equal(cresp.StatusCode, http.StatusTooManyRequests)

			resp, _, err := gw.post(r.path, outsider, r.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK) // another account is not limited

			clock.Set(clock.Now().Add(20 * time.Second))
			resp, _, err = gw.post(r.path, second, r.body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK) // refilled after Retry-After

			// Removed (null), the account's keys have their own limits only.
			gw.setAccountLimits(t, account, nil, nil)
			for range 5 {
				resp, _, err := gw.post(r.path, first, r.body)
				is.NoErr(err)
				is.Equal(resp.StatusCode, http.StatusOK)
			}
		})
	}
}

// An account's tokens per minute are shared by its keys too: tokens one
// key used are missing for the other.
func TestRateLimit_AccountTokensPerMinuteAcrossItsKeys(t *testing.T) {
	is := is.New(t)
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock)) // no limit of the keys'
	first, _ := gw.newKey(t, "tokens", "10")
	second, _ := gw.newKey(t, "tokens", "")
	tpm := int64(20)
	gw.setAccountLimits(t, "tokens", nil, &tpm)

	resp, _, err := gw.post("/svc/v1/messages", first, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // a full bucket admits the call
	for _, c := range []struct{ surface, path, body string }{
		{"messages", "/svc/v1/messages", capped16},
		{"chat", "/svc/v1/chat/completions", chatCapped16},
	} {
		resp, out, err := gw.post(c.path, second, c.body)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusTooManyRequests) // the first key's call used the account's bucket up
		surface, typ := envelopeKind(t, out)
		is.Equal(surface, c.surface)
		if c.surface == "chat" {
			is.Equal(typ, "tokens") // OpenAI's type for tokens per minute
		}
		is.True(strings.Contains(string(out), "this account allows 20 tokens per minute"))
		wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		is.NoErr(err)
		is.True(wait >= 1 && wait <= 60) // until the bucket holds the estimate
	}

	clock.Set(clock.Now().Add(time.Minute))
	resp, _, err = gw.post("/svc/v1/messages", second, capped16)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusOK) // refilled
}

// A call the account's requests per minute refuse takes nothing from its
// key's: with the key allowed 4 a minute and its account 2, two calls
// pass and three are refused by the account; once the account's limit is
// lifted, the key still has the two calls it did not make, and only its
// fifth in the minute is refused, by the key's own limit.
func TestRateLimit_AnAccountsRefusalLeavesTheKeysRequests(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock), func(o *Options) { o.RPM = 4 }) // each key's own
	for _, r := range rateSurfaces {
		t.Run(r.surface, func(t *testing.T) {
			is := is.New(t)
			account := "lifted-" + r.surface
			key, _ := gw.newKey(t, account, "10")
			rpm := int64(2)
			gw.setAccountLimits(t, account, &rpm, nil)
			call := func() (int, string) {
				resp, out, err := gw.post(r.path, key, r.body)
				is.NoErr(err)
				return resp.StatusCode, string(out)
			}
			for i := range 2 {
				if code, out := call(); code != http.StatusOK {
					t.Fatalf("call %d: %d %s", i, code, out) // within both limits
				}
			}
			for range 3 {
				code, out := call()
				is.Equal(code, http.StatusTooManyRequests)                                  // the account's third, fourth and fifth
				is.True(strings.Contains(out, "this account allows 2 requests per minute")) // refused by the account
			}
			// Count-tokens endpoints are refused by the account too, and
			// take nothing from the key either.
			cresp, _, err := gw.post("/svc/v1/messages/count_tokens", key, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			is.NoErr(err)
			is.Equal(cresp.StatusCode, http.StatusTooManyRequests)

			gw.setAccountLimits(t, account, nil, nil) // lifted, within the same minute
			for i := range 2 {
				if code, out := call(); code != http.StatusOK {
					t.Fatalf("after the lift, call %d: %d %s", i, code, out) // the key's third and fourth
				}
			}
			code, out := call()
			is.Equal(code, http.StatusTooManyRequests)                              // the key's fifth
			is.True(strings.Contains(out, "this key allows 4 requests per minute")) // refused by the key now
		})
	}
}
