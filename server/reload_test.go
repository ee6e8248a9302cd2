package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// flatPrices charges every request type and tier input and output USD per
// million tokens.
func flatPrices(t *testing.T, input, output string) *billing.Prices {
	t.Helper()
	in, _, err := apd.NewFromString(input)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := apd.NewFromString(output)
	if err != nil {
		t.Fatal(err)
	}
	p := billing.DefaultPrices()
	for _, rt := range llm.RequestTypes {
		for _, tier := range llm.Tiers {
			p.Set(rt, tier, billing.NewPrice(*in, *out))
		}
	}
	return p
}

func TestReload_CallsInFlightKeepWhatTheyStartedWith(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	slow := fixture.New(fixture.Options{TokensPerSecond: 40}) // a stream lasts a while
	old := upstream.NewRouter([]upstream.Candidate{{Name: "old", Backend: slow}})
	gw := newMetricsGateway(t, MetricsOptions{}, func(o *Options) {
		o.Router, o.Prices = old, flatPrices(t, "1000", "2000")
	})
	used := func() apd.Decimal {
		t.Helper()
		is.NoErr(gw.Store.Sync(ctx))
		acct, err := gw.Store.AccountByName(ctx, "acme")
		is.NoErr(err)
		return acct.TotalUsed
	}
	stream := strings.Replace(metricsChat, `"max_tokens"`, `"stream":true,"stream_options":{"include_usage":true},"max_tokens"`, 1)

	// A stream starts on the old configuration…
	req, err := http.NewRequest(http.MethodPost, gw.URL+"/svc/v1/chat/completions", strings.NewReader(stream))
	is.NoErr(err)
	req.Header.Set("Authorization", "Bearer "+gw.Key)
	resp, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	defer resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	is.NoErr(err) // its first frame

	// …the configuration changes under it: prices double, another
	// backend serves, and each key gets one request a minute…
	next := upstream.NewRouter([]upstream.Candidate{{Name: "new", Backend: fixture.New(fixture.Options{})}})
	is.NoErr(gw.Server.Reload(Options{Router: next, Prices: flatPrices(t, "2000", "4000"), RPM: 1}))

	// …and the stream finishes on what it started with.
	_, err = io.Copy(io.Discard, resp.Body)
	is.NoErr(err)
	first := used()
	is.True(first.Sign() > 0) // charged at the old prices

	// The next call is served by the new backend at the new prices.
	resp2, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", stream)
	is.Equal(resp2.StatusCode, http.StatusOK)
	var second, want apd.Decimal
	total := used()
	_, err = apd.BaseContext.Sub(&second, &total, &first)
	is.NoErr(err)
	_, err = apd.BaseContext.Add(&want, &first, &first)
	is.NoErr(err)
	is.Equal(second.Cmp(&want), 0) // the same call, twice the price
	m := gw.scrape(t)
	is.Equal(m.value("svcgw_upstream_attempts_total", "candidate", "old"), 1.0)
	is.Equal(m.value("svcgw_upstream_attempts_total", "candidate", "new"), 1.0)
	is.Equal(m.labelValues("svcgw_upstream_breaker_open", "candidate"), []string{"new"}) // the router in force

	// And the new limit holds: the key's one request this minute is spent.
	resp3, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", metricsChat)
	is.Equal(resp3.StatusCode, http.StatusTooManyRequests)

	is.True(gw.Server.Reload(Options{}) != nil) // a reload without a router is refused
}
