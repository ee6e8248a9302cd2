package server

import (
	"strconv"
	"time"

	"github.com/svcgw/svcgw/store"
)

// A call is counted against two sets of per-minute buckets: its key's
// (s.limiter: the key's own limits, or the server's defaults) and, when
// the key's account has limits of its own, its account's (s.accounts),
// which all of the account's keys share. Both are divided among the
// instances serving the database (share). The key's are taken first, so a
// call its key refuses takes nothing from what the account's other keys
// share.

// takeRequest takes one request from the key's requests-per-minute bucket
// (limit rpm) and then from its account's, or refuses the call (429).
func (s *Server) takeRequest(caller *store.Key, rpm int64, now time.Time) error {
	if err := s.limiter.Request(caller.ID, s.share(rpm), now); err != nil {
		return s.sharedLimit(err, "key", rpm)
	}
	if a := accountLimit(caller.AccountRPM); a > 0 {
		if err := s.accounts.Request(accountBucket(caller), s.share(a), now); err != nil {
			return s.sharedLimit(err, "account", a)
		}
	}
	return nil
}

// admitTokens takes the call's estimated input from the key's and then the
// account's tokens-per-minute buckets, or refuses the call (429) having
// taken nothing.
func (s *Server) admitTokens(c *call, input int) error {
	if err := s.limiter.AdmitTokens(c.caller.ID, c.tpm, input, c.start); err != nil {
		return s.sharedLimit(err, "key", limitOr(c.caller.Limits.TPM, c.set.tpm))
	}
	if c.accountTPM > 0 {
		if err := s.accounts.AdmitTokens(accountBucket(c.caller), c.accountTPM, input, c.start); err != nil {
			s.limiter.SpendTokens(c.caller.ID, c.tpm, -input, c.start)
			return s.sharedLimit(err, "account", accountLimit(c.caller.AccountTPM))
		}
	}
	return nil
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
