package account_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/account"
)

// TestAccountRequest_TimesOut holds the database's write lock from another
// connection (as another process could), so that the call the handler must
// make visible cannot be committed, and checks that the request ends at its
// time limit with a 504 instead of waiting.
func TestAccountRequest_TimesOut(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	h := account.New(e.st, e.clock.Now, testWriteErr(t), account.Limits{Timeout: 100 * time.Millisecond, Share: 1})

	db, err := sql.Open("sqlite", e.path+"?_pragma=busy_timeout(5000)")
	is.NoErr(err)
	defer db.Close()
	conn, err := db.Conn(context.Background())
	is.NoErr(err)
	defer conn.Close()
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	is.NoErr(err) // the write lock is held
	e.st.RecordGeneration(store.Generation{ID: "g1", AccountID: e.acme.AccountID, KeyID: e.acme.ID, Cost: money.Micros(100_000)})

	started := time.Now()
	status, body := call(t, h.Credits, "GET", "/svc/v1/credits", "", e.acme)
	is.Equal(status, 504) // stopped at its limit
	is.Equal(body["error"].(map[string]any)["message"],
		"This request did not finish within 100ms and was stopped; retry later, or ask for a shorter date range.")
	is.True(time.Since(started) < 4*time.Second) // well before the lock's busy timeout would have ended it
	_, err = conn.ExecContext(context.Background(), "ROLLBACK")
	is.NoErr(err)

	status, _ = call(t, h.Credits, "GET", "/svc/v1/credits", "", e.acme)
	is.Equal(status, 200) // fine once the lock is gone
}
