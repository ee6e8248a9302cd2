package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/matryer/is"
)

// A refund of everything an account has left, made through the
// management API right after its calls, goes through, and the account
// can spend nothing more: on PostgreSQL the slice of its balance the
// instance leased for the calls (sized to them, more than they spent) is
// given back by the refund, not left there to be spent below zero.
func TestAdminAPI_ARefundOfAllThatIsLeftAfterCalls(t *testing.T) {
	is := is.New(t)
	gw := newAdminGateway(t)
	key, _ := gw.newKey(t, "refunds", "1")
	for range 3 {
		resp, out, err := gw.post("/svc/v1/chat/completions", key, chatBody)
		is.NoErr(err)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call: %d %s", resp.StatusCode, out)
		}
	}
	is.NoErr(gw.Store.Sync(context.Background())) // the calls' charges written
	left := adminCall[adminAccount](t, gw, gw.Ops, "GET", "/admin/v1/accounts/refunds", "", http.StatusOK).Balance
	t.Logf("left after the calls: %s USD", left)
	refund := adminCall[struct{ Balance string }](t, gw, gw.Ops, "POST", "/admin/v1/accounts/refunds/credits",
		`{"amount":"-`+left+`","note":"refund"}`, http.StatusCreated)
	is.Equal(refund.Balance, "0.000000")
	// The server's budget refresh (one instance on SQLite reads credits
	// again within it; on PostgreSQL the lease alone already refuses).
	time.Sleep(time.Second + 100*time.Millisecond)
	resp, out, err := gw.post("/svc/v1/chat/completions", key, chatBody)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusPaymentRequired) // nothing left to spend
	t.Logf("after the refund: %d %s", resp.StatusCode, out)
	a := adminCall[adminAccount](t, gw, gw.Ops, "GET", "/admin/v1/accounts/refunds", "", http.StatusOK)
	is.Equal(a.Balance, "0.000000") // never below zero
}
