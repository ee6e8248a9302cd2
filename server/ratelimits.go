package server

import (
	"strconv"
	"time"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/store"
)

// A call is counted against two sets of per-minute buckets: its key's
// (s.limiter: the key's own limits, or the server's defaults) and, when
// the key's account has limits of its own, its account's (s.accounts),
// which all of the account's keys share. Both are divided among the
// instances serving the database (share). A call takes from both or from
// neither (billing.RequestBoth, AdmitTokensBoth): one the account refuses
// leaves the key's allowance whole, and one its key refuses takes nothing
// from what the account's other keys share.

// takeRequest takes one request from the key's requests-per-minute bucket
// (limit rpm) and from its account's, or refuses the call (429) having
// taken from neither.
func (s *Server) takeRequest(caller *store.Key, rpm int64, now time.Time) error {
	a := accountLimit(caller.AccountRPM)
	var acct billing.Bucket
	if a > 0 {
		acct = billing.Bucket{Limiter: s.accounts, ID: accountBucket(caller), Limit: s.share(a)}
	}
	which, err := billing.RequestBoth(billing.Bucket{Limiter: s.limiter, ID: caller.ID, Limit: s.share(rpm)}, acct, now)
	switch {
	case err == nil:
		return nil
	case which == 1:
		return s.sharedLimit(err, "account", a)
	}
	return s.sharedLimit(err, "key", rpm)
}

// admitTokens takes the call's estimated input from the key's and the
// account's tokens-per-minute buckets, or refuses the call (429) having
// taken from neither.
func (s *Server) admitTokens(c *call, input int) error {
	var acct billing.Bucket
	if c.accountTPM > 0 {
		acct = billing.Bucket{Limiter: s.accounts, ID: accountBucket(c.caller), Limit: c.accountTPM}
	}
	which, err := billing.AdmitTokensBoth(billing.Bucket{Limiter: s.limiter, ID: c.caller.ID, Limit: c.tpm}, acct, input, c.start)
	switch {
	case err == nil:
		return nil
	case which == 1:
		return s.sharedLimit(err, "account", accountLimit(c.caller.AccountTPM))
	}
	return s.sharedLimit(err, "key", limitOr(c.caller.Limits.TPM, c.set.tpm))
}

// spendTokens takes tokens from the key's and the account's
// tokens-per-minute buckets without checking, or gives them back when
// negative (see billing.RateLimiter.SpendTokens).
func (s *Server) spendTokens(c *call, tokens int, now time.Time) {
	s.limiter.SpendTokens(c.caller.ID, c.tpm, tokens, now)
	if c.accountTPM > 0 {
		s.accounts.SpendTokens(accountBucket(c.caller), c.accountTPM, tokens, now)
	}
}

// accountLimit is an account's per-minute limit; 0: none.
func accountLimit(l *int64) int64 {
	return limitOr(l, 0)
}

// accountBucket names the caller's account in s.accounts.
func accountBucket(caller *store.Key) string {
	return strconv.FormatInt(caller.AccountID, 10)
}
