package server

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// Boundaries, each pinned on both sides: the limit itself is allowed, one
// unit past it is refused.

func TestCaps_ExactlyOnTheCap(t *testing.T) {
	// spend + reservation + this call's ceiling = cap is admitted; one
	// micro-dollar more is refused.
	is := is.New(t)
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)}
	gw := newTestGateway(t, withClock(clock), func(o *Options) { o.BudgetRefresh = time.Nanosecond })
	key, _ := gw.newKey(t, "capped", "100")
	acct, err := gw.Store.AccountByName(ctx, "capped")
	is.NoErr(err)
	setCap := func(micros int64) {
		t.Helper()
		c := money.Micros(micros).Decimal()
		if _, err := gw.Store.UpdateAccountCaps(ctx, acct.ID, func(cs *store.Caps) { cs.Daily = &c }); err != nil {
			t.Fatal(err)
		}
	}
	call := func() (int, string, string) {
		t.Helper()
		resp, out, err := gw.post("/svc/v1/chat/completions", key, chatCapped16)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			ID    string                   `json:"id"`
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(out, &v)
		return resp.StatusCode, v.ID, v.Error.Message
	}

	// The call's ceiling, as the refusal under a zero cap states it.
	setCap(0)
	st, _, msg := call()
	is.Equal(st, http.StatusPaymentRequired)
	m := regexp.MustCompile(`this call may cost up to ([0-9.]+) USD`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("the refusal does not state the call's ceiling: %s", msg)
	}
	ceiling := microsOf(t, m[1])
	is.True(ceiling > 0)

	setCap(ceiling - 1)
	st, _, _ = call()
	is.Equal(st, http.StatusPaymentRequired) // one micro-dollar short
	setCap(ceiling)
	st, id, msg := call()
	is.Equal(st, http.StatusOK) // exactly on the cap
	if st != http.StatusOK {
		t.Fatalf("refused on the cap: %s", msg)
	}

	// Now with spend: the first call's actual charge counts against the cap.
	resp, out := gw.do(t, http.MethodGet, "/svc/v1/generation?id="+id, "", "Authorization", "Bearer "+key)
	is.Equal(resp.StatusCode, http.StatusOK)
	var g struct{ Data generation }
	is.NoErr(json.Unmarshal(out, &g))
	spent := microsOf(t, g.Data.TotalCost)
	is.True(spent > 0 && spent <= ceiling)
	setCap(spent + ceiling - 1)
	st, _, _ = call()
	is.Equal(st, http.StatusPaymentRequired) // spend + ceiling is one over
	setCap(spent + ceiling)
	st, _, _ = call()
	is.Equal(st, http.StatusOK) // spend + ceiling is exactly the cap
}

// microsOf parses a USD amount into micro-dollars.
func microsOf(t *testing.T, usd string) int64 {
	t.Helper()
	d, _, err := apd.NewFromString(usd)
	if err != nil {
		t.Fatalf("amount %q: %v", usd, err)
	}
	return micros(t, *d)
}

func TestBodyLimit_ExactlyTheLimit(t *testing.T) {
	const limit = 2048
	gw := newTestGateway(t, func(o *Options) { o.MaxBodyBytes = limit })
	// padTo grows body's user text with spaces to n bytes.
	padTo := func(body string, n int) string {
		out := strings.Replace(body, `"hi"`, `"hi`+strings.Repeat(" ", n-len(body))+`"`, 1)
		if len(out) != n {
			t.Fatalf("padded body is %d bytes, want %d", len(out), n)
		}
		return out
	}
	for _, r := range surfaceRoutes {
		t.Run(r.path, func(t *testing.T) {
			is := is.New(t)
			resp, out := gw.do(t, http.MethodPost, r.path, padTo(r.body, limit))
			is.Equal(resp.StatusCode, http.StatusOK) // exactly max_body_bytes
			if resp.StatusCode != http.StatusOK {
				t.Logf("%s", out)
			}
			resp, out = gw.do(t, http.MethodPost, r.path, padTo(r.body, limit+1))
			is.Equal(resp.StatusCode, http.StatusRequestEntityTooLarge) // one byte more
			surface, _ := envelopeKind(t, out)
			is.Equal(surface, r.surface)
		})
	}
}
