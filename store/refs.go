package store

import (
	"errors"
	"fmt"
)

// errNoReference refuses a generation whose account or key does not exist:
// a row refused as such (unstorable), as a foreign key refused it where
// one checks it.
var errNoReference = errors.New("does not exist")

// ledgerRefs are the accounts and keys the ledger writer has seen in the
// database. Where no foreign key checks a generation's account and key row
// by row — PostgreSQL since its migration 0004 (a query and a row lock of
// their own for each reference: about a quarter of PostgreSQL's CPU per
// committed generation), and SQLite's bulk writer (bulkwriter.go) — the
// writer checks every generation's against them before a commit. svcgw
// never deletes an account or a key (a key is revoked, its row kept), so
// one seen once exists for good, and in steady state the check asks the
// database nothing: only a batch with an account or key the writer has not
// seen yet costs a lookup. Only the ledger writer uses it.
type ledgerRefs struct {
	accounts map[int64]struct{}
	keys     map[string]struct{}
}

// check returns an error wrapping errNoReference when a row names an
// account or key that does not exist, after asking lookup about those it
// has not seen (lookup calls found for each that exists: an account, or a
// key with acct 0); any other error is lookup's.
func (r *ledgerRefs) check(rows []genRow, lookup func(accts []int64, keys []string, found func(acct int64, key string)) error) error {
	if r.accounts == nil {
		r.accounts, r.keys = make(map[int64]struct{}), make(map[string]struct{})
	}
	var accts []int64 // not seen yet, repeats and all
	var keys []string
	for i := range rows {
		g := &rows[i].g
		if _, ok := r.accounts[g.AccountID]; !ok {
			accts = append(accts, g.AccountID)
		}
		if _, ok := r.keys[g.KeyID]; g.KeyID != "" && !ok {
			keys = append(keys, g.KeyID)
		}
	}
	if len(accts) == 0 && len(keys) == 0 {
		return nil
	}
	err := lookup(accts, keys, func(acct int64, key string) {
		if key != "" {
			r.keys[key] = struct{}{}
		} else {
			r.accounts[acct] = struct{}{}
		}
	})
	if err != nil {
		return fmt.Errorf("ledger: look up accounts and keys: %w", err)
	}
	for i := range rows {
		g := &rows[i].g
		if _, ok := r.accounts[g.AccountID]; !ok {
			return fmt.Errorf("ledger: insert generation %q: account %d %w", g.ID, g.AccountID, errNoReference)
		}
		if _, ok := r.keys[g.KeyID]; g.KeyID != "" && !ok {
			return fmt.Errorf("ledger: insert generation %q: key %q %w", g.ID, g.KeyID, errNoReference)
		}
	}
	return nil
}
