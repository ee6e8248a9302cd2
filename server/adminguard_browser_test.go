package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/sqlite"
)

// attackPage is what a hostile site serves: on load, it reads /metrics and
// POSTs /-/reload on base (the admin listener's origin, or its own after
// DNS rebinding), then submits a form to /-/reload, and leaves what it
// could read in window.result. A token parameter is sent as the admin
// token, as the operator's own page would.
const attackPage = `<!doctype html><title>attack</title><script>
const params = new URLSearchParams(location.search);
const base = params.get("base") || location.origin;
const headers = params.get("token") ? {Authorization: "Bearer " + params.get("token")} : {};
(async () => {
  const out = {};
  try { const r = await fetch(base + "/metrics", {headers}); out.metrics = r.status + " " + (await r.text()); }
  catch (e) { out.metrics = "unreadable"; }
  try { const r = await fetch(base + "/debug/pprof/cmdline", {headers}); out.cmdline = r.status + " " + (await r.text()); }
  catch (e) { out.cmdline = "unreadable"; }
  try { const r = await fetch(base + "/-/reload", {method: "POST", headers, mode: base === location.origin ? "same-origin" : "no-cors"}); out.reload = r.status; }
  catch (e) { out.reload = "failed"; }
  window.result = JSON.stringify(out);
})();
</script>`

// TestAdminGuard_InChromium drives a real browser the ways a web page
// reaches an admin listener: a page on another origin, and a page whose
// name is rebound to the listener's address (Chromium's host resolver
// maps evil.test to 127.0.0.1, as a rebinding DNS server would once the
// page is loaded). Neither reads a metric nor reloads anything; the
// listener's own origin does both.
func TestAdminGuard_InChromium(t *testing.T) {
	browser := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	is := is.New(t)
	m := NewMetrics(MetricsOptions{})
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "svcgw.db"), store.Options{OnCommit: m.ObserveCommit})
	is.NoErr(err)
	gw := newTestGateway(t, withStore(st), func(o *Options) { o.Metrics = m })
	var reloads, reached atomic.Int64
	admin := gw.Server.Admin(AdminOptions{Reload: func(context.Context) error { reloads.Add(1); return nil }})
	token, _, err := st.CreateAdminToken(context.Background(), "ops", false)
	is.NoErr(err)
	guard, err := NewAdminGuard(slog.New(slog.DiscardHandler), "127.0.0.1:0", nil)
	is.NoErr(err)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(attackPage))
	})
	// The admin listener, and beside it, unguarded, the page as evil.test
	// served it before its name was rebound to this address.
	mux := http.NewServeMux()
	mux.Handle("/attack", page)
	mux.Handle("/", guard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/favicon.ico" { // the browser's own, for a tab on this origin, whenever it gets to it
			reached.Add(1)
		}
		admin.ServeHTTP(w, r)
	})))
	listener := httptest.NewServer(mux)
	defer listener.Close()
	other := httptest.NewServer(page) // another origin: another port
	defer other.Close()
	port := listener.Listener.Addr().String()
	port = port[strings.LastIndex(port, ":"):]

	type result struct {
		Metrics, Cmdline string
		Reload           any
	}
	attack := func(url string) result {
		t.Helper()
		tab := newTab(t, browser)
		do(t, tab, "open "+url, chromedp.Navigate(url))
		waitFor(t, tab, "the page's requests", "window.result !== undefined")
		var r result
		is.NoErr(json.Unmarshal([]byte(eval[string](t, tab, "window.result")), &r))
		return r
	}

	t.Run("a page on another origin", func(t *testing.T) {
		is := is.New(t)
		r := attack(other.URL + "/attack?base=" + listener.URL)
		is.Equal(r.Metrics, "unreadable")  // the browser's same-origin policy
		is.Equal(reached.Load(), int64(0)) // and the guard: no handler ran
		is.Equal(reloads.Load(), int64(0))
	})
	t.Run("a frame on another origin", func(t *testing.T) {
		is := is.New(t)
		tab := newTab(t, browser)
		do(t, tab, "open a page that frames the listener", chromedp.Navigate(other.URL+"/attack?base="+listener.URL),
			chromedp.Evaluate[chromedp.Void](`(() => { const f = document.createElement("iframe"); f.onload = () => { window.framed = true; }; f.src = "`+listener.URL+`/debug/pprof/cmdline"; document.body.appendChild(f); })()`))
		waitFor(t, tab, "the frame", "window.framed === true")
		is.Equal(reached.Load(), int64(0)) // no handler ran
	})
	t.Run("a page rebound to the listener's address", func(t *testing.T) {
		is := is.New(t)
		r := attack("http://evil.test" + port + "/attack")
		is.True(strings.HasPrefix(r.Metrics, "403 ")) // same-origin to the browser, so readable: the refusal
		is.True(strings.Contains(r.Metrics, "forbidden_host"))
		is.True(!strings.Contains(r.Metrics, "svcgw_"))
		is.True(strings.HasPrefix(r.Cmdline, "403 "))
		is.Equal(r.Reload, float64(403))
		is.Equal(reached.Load(), int64(0)) // no handler ran
		is.Equal(reloads.Load(), int64(0))
	})
	t.Run("the listener's own origin", func(t *testing.T) {
		is := is.New(t)
		r := attack(listener.URL + "/attack?token=" + token)
		is.True(strings.HasPrefix(r.Metrics, "200 ")) // what the guard lets through
		is.True(strings.Contains(r.Metrics, "svcgw_"))
		is.Equal(r.Reload, float64(200))
		is.Equal(reloads.Load(), int64(1))
	})
	t.Run("a form on another origin", func(t *testing.T) {
		is := is.New(t)
		tab := newTab(t, browser)
		before := reached.Load()
		do(t, tab, "submit the form", chromedp.Navigate(other.URL+"/attack?base="+listener.URL),
			chromedp.Evaluate[chromedp.Void](`(() => { const f = document.createElement("form"); f.method = "POST"; f.action = "`+listener.URL+`/-/reload"; document.body.appendChild(f); f.submit(); })()`))
		// The submission navigates the tab: poll across the navigation.
		answered := false
		for range 100 {
			if ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](`location.href.endsWith("/-/reload") && document.body.innerText.includes("forbidden_origin")`)); err == nil && ok {
				answered = true
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		is.True(answered)                // the browser showed the refusal
		is.Equal(reached.Load(), before) // refused before any handler
		is.Equal(reloads.Load(), int64(1))
	})
}
