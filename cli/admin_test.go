package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

// TestCLI_OneRuleTwoDoors: the command line's changes go through the
// store calls the management API makes, so they keep the same rules and
// leave the same audit entries, with "cli" as their actor.
func TestCLI_OneRuleTwoDoors(t *testing.T) {
	is := is.New(t)
	db := newDB(t)
	code, _, stderr := run(t, db, "keys", "create", "--account", "acme", "--name", "web", "--rpm", "60", "--expires-at", "2999-01-01T00:00:00Z")
	is.Equal(code, 0) // keys create
	var keys []struct {
		ID        string  `json:"id"`
		RPM       *int64  `json:"rpm"`
		ExpiresAt *string `json:"expires_at"`
	}
	code, out, _ := run(t, db, "keys", "list", "--json")
	is.Equal(code, 0)
	is.NoErr(json.Unmarshal([]byte(out), &keys))
	is.Equal(*keys[0].RPM, int64(60))
	is.Equal(*keys[0].ExpiresAt, "2999-01-01T00:00:00Z")
	code, _, _ = run(t, db, "keys", "limit", keys[0].ID, "--expires", "none", "--daily", "1.5")
	is.Equal(code, 0) // keys limit
	code, _, _ = run(t, db, "credits", "cap", "--account", "acme", "--daily", "3")
	is.Equal(code, 0) // credits cap

	// Credits: idempotent, negative down to zero and never below.
	code, _, _ = run(t, db, "credits", "add", "--account", "acme", "--idempotency-key", "evt_1", "--reference", "stripe:pi_1", "10")
	is.Equal(code, 0)
	code, _, stderr = run(t, db, "credits", "add", "--account", "acme", "--idempotency-key", "evt_1", "--reference", "stripe:pi_1", "10")
	is.Equal(code, 0) // a rerun
	is.True(strings.Contains(stderr, "nothing changed"))
	code, _, stderr = run(t, db, "credits", "add", "--account", "acme", "--idempotency-key", "evt_1", "11")
	is.Equal(code, 1) // the key, for another credit
	is.True(strings.Contains(stderr, "used for another credit"))
	code, _, stderr = run(t, db, "credits", "add", "--account", "acme", "--", "-10.01")
	is.Equal(code, 1) // below zero
	is.True(strings.Contains(stderr, "below zero"))
	code, _, stderr = run(t, db, "credits", "add", "--account", "acme", "--note", "refund", "--", "-4")
	is.Equal(code, 0)
	is.True(strings.Contains(stderr, "took 4.000000 USD back"))
	var history []struct {
		Amount string `json:"amount"`
		Actor  string `json:"actor"`
	}
	code, out, _ = run(t, db, "credits", "history", "--account", "acme", "--json")
	is.Equal(code, 0)
	is.NoErr(json.Unmarshal([]byte(out), &history))
	is.Equal(len(history), 2) // the top-up once, and the refund
	is.Equal(history[0].Amount, "-4.000000")
	is.Equal(history[1].Actor, store.ActorCLI)

	// Admin tokens, and the trail of it all.
	code, tok, _ := run(t, db, "admin", "tokens", "create", "--name", "billing", "--read-only")
	is.Equal(code, 0)
	is.True(strings.HasPrefix(tok, store.AdminSecretPrefix))
	code, _, stderr = run(t, db, "admin", "tokens", "create", "--name", "billing")
	is.Equal(code, 1) // the name is taken
	code, _, stderr = run(t, db, "admin", "tokens", "create", "--name", "cli")
	is.Equal(code, 1) // the command line's own name
	code, out, _ = run(t, db, "admin", "tokens", "list")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "read-only"))
	is.True(!strings.Contains(out, strings.TrimSpace(tok))) // never the secret
	code, _, _ = run(t, db, "admin", "tokens", "revoke", "billing")
	is.Equal(code, 0)

	var trail []struct {
		Actor, Action, Target string
	}
	code, out, _ = run(t, db, "admin", "audit", "--json")
	is.Equal(code, 0)
	is.NoErr(json.Unmarshal([]byte(out), &trail))
	var got []string
	for i := len(trail) - 1; i >= 0; i-- {
		is.Equal(trail[i].Actor, store.ActorCLI)
		got = append(got, trail[i].Action)
	}
	is.Equal(got, []string{"account.create", "key.create", "key.update", "account.update",
		"credits.add", "credits.add", "admin_token.create", "admin_token.revoke"})

	// The same row the API reads.
	st, err := store.Open(context.Background(), db, store.Options{Existing: true})
	is.NoErr(err)
	defer st.Close()
	a, err := st.AccountByName(context.Background(), "acme")
	is.NoErr(err)
	is.Equal(a.DailyCap.String(), "3.000000")
	is.Equal(a.Balance.String(), "6.000000")
}
