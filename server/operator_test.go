package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// The operator's page and its files are served on the admin listener
// without a token; everything with data behind it needs one.
func TestOperator_PageOpenDataGuarded(t *testing.T) {
	is := is.New(t)
	gw := newAdminGateway(t)
	get := func(method, path, token string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, gw.AdminURL+path, nil)
		is.NoErr(err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		is.NoErr(err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		is.NoErr(err)
		return resp, string(b)
	}

	resp, page := get(http.MethodGet, "/admin/", "")
	is.Equal(resp.StatusCode, http.StatusOK)
	is.True(strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'"))
	is.True(strings.Contains(page, `src="/admin/assets/operator.js?v=`))
	is.True(!strings.Contains(page, gw.Key)) // no data in the page
	resp, _ = get(http.MethodGet, "/admin", "")
	is.Equal(resp.StatusCode, http.StatusMovedPermanently)
	is.Equal(resp.Header.Get("Location"), "/admin/")
	resp, _ = get(http.MethodGet, "/admin/assets/operator.js", "")
	is.Equal(resp.StatusCode, http.StatusOK)
	resp, _ = get(http.MethodGet, "/admin/assets/nothing.js", "")
	is.Equal(resp.StatusCode, http.StatusNotFound)

	// Only GET and HEAD of the page are open.
	resp, _ = get(http.MethodPost, "/admin/", "")
	is.Equal(resp.StatusCode, http.StatusUnauthorized)
	// The token endpoint and the API need a token.
	for _, path := range []string{"/admin/token", "/admin/v1/accounts", "/admin/other"} {
		resp, _ = get(http.MethodGet, path, "")
		is.Equal(resp.StatusCode, http.StatusUnauthorized)
	}
	resp, body := get(http.MethodGet, "/admin/token", gw.Viewer)
	is.Equal(resp.StatusCode, http.StatusOK)
	is.True(strings.Contains(body, `"name":"viewer"`))
	is.True(strings.Contains(body, `"read_only":true`))
	resp, body = get(http.MethodGet, "/admin/token", gw.Ops)
	is.Equal(resp.StatusCode, http.StatusOK)
	is.True(strings.Contains(body, `"read_only":false`))
	is.True(!strings.Contains(body, gw.Ops)) // never the secret
}

// The top spenders (usage by account) are each account's own totals,
// whichever roll-up rows the range is read from: by day up to a year, by
// request type beyond.
func TestOperator_UsageByAccountIsEachAccountsTotal(t *testing.T) {
	is := is.New(t)
	gw := newAdminGateway(t)
	seedDashboard(t, gw.testGateway, gw.Key, gw.KeyID)
	key2, id2 := gw.newKey(t, "beta-lab", "5")
	seedDashboard(t, gw.testGateway, key2, id2)
	today := time.Now().UTC()
	for _, q := range []string{
		"", // all time: by request type
		"&start_date=" + today.AddDate(0, 0, -29).Format(time.DateOnly), // 30 days: by day
		"&start_date=" + today.AddDate(0, 0, -6).Format(time.DateOnly) + "&end_date=" + today.AddDate(0, 0, -1).Format(time.DateOnly),
		"&start_date=" + today.AddDate(-2, 0, 0).Format(time.DateOnly) + "&end_date=" + today.Format(time.DateOnly), // two years: by request type
	} {
		type report struct {
			Data []struct {
				Bucket   string
				Requests int64
				Cost     string
			}
			Total struct {
				Requests int64
				Cost     string
			}
		}
		byAccount := adminCall[report](t, gw, gw.Ops, "GET", "/admin/v1/usage?group_by=account"+q, "", 200)
		is.Equal(len(byAccount.Data), 2)
		var sum int64
		for _, b := range byAccount.Data {
			own := adminCall[report](t, gw, gw.Ops, "GET", "/admin/v1/usage?group_by=request_type&account="+b.Bucket+q, "", 200)
			is.Equal(b.Requests, own.Total.Requests) // q
			is.Equal(b.Cost, own.Total.Cost)
			sum += b.Requests
		}
		is.Equal(byAccount.Total.Requests, sum)
		is.True(sum > 0)
	}
}
