package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// The dashboard's tests drive the real page in headless Chromium (Debian's
// chromium package; .ci/run installs it). Without Chromium they skip, unless
// SVCGW_REQUIRE_CHROMIUM=1 (CI sets it), when they fail.
const requireChromiumEnv = "SVCGW_REQUIRE_CHROMIUM"

// screenshotsEnv names a directory the screenshots are also copied to (the
// README's picture is made this way); they always go to the test's
// artifact directory (go test -artifacts keeps them).
const screenshotsEnv = "SVCGW_DASHBOARD_SCREENSHOTS"

// chromiumPath finds the browser, or skips (fails under SVCGW_REQUIRE_CHROMIUM).
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SVCGW_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "Chromium not found (install Debian's chromium package: apt-get install chromium, or set SVCGW_CHROMIUM); the dashboard's browser tests did not run"
	if os.Getenv(requireChromiumEnv) == "1" {
		t.Fatal(msg + " and " + requireChromiumEnv + "=1 requires them")
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts one headless Chromium for a test and its subtests, each
// of which opens its own tab (newTab): a fresh tab has its own
// sessionStorage, so it starts signed out. extra adds Chromium options.
func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(append(chromedp.DefaultExecAllocatorOptions[:], extra...),
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(browser); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	return browser
}

// newTab opens a tab of browser, closed when t ends; every action in it
// must finish within 30 s.
func newTab(t testing.TB, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	tab, cancelTimeout := context.WithTimeout(tab, 30*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	return tab
}

// do runs actions in tab and fails the test on error.
func do(t testing.TB, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in tab.
func eval[T any](t testing.TB, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is true.
func waitFor(t testing.TB, tab context.Context, what, predicate string) {
	t.Helper()
	if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, predicate, err)
	}
}

// signIn opens the page at path and signs in with key, by keyboard.
func signIn(t testing.TB, tab context.Context, base, path, key string) {
	t.Helper()
	do(t, tab, "open the page",
		chromedp.Navigate(base+path),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), key+"\r"), // Enter submits
	)
}

// setSelect picks an option of a <select> as a user does: focus, choose,
// and the change event.
func setSelect(t testing.TB, tab context.Context, id, value string) {
	t.Helper()
	eval[chromedp.Void](t, tab, fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.focus(); s.value = %q; s.dispatchEvent(new Event('change')); })()`, id, value))
}

// seedDashboard records a month of generations for key's account, as the
// ledger would have (several applications, request types and surfaces a
// day), and makes a few real calls on top.
func seedDashboard(t *testing.T, gw *testGateway, key, keyID string) {
	t.Helper()
	ctx := context.Background()
	k, err := gw.Store.Authenticate(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	apps := []string{"web", "support-bot", "notebook"}
	types := []llm.RequestType{llm.TypePro, llm.TypeCode, llm.TypeFlash, llm.TypeJSON, llm.TypeVision}
	surfaces := []llm.Surface{llm.SurfaceChat, llm.SurfaceMessages, llm.SurfaceGenContent, llm.SurfaceResponses}
	for d := 29; d >= 1; d-- {
		n := 2 + (d*7)%6
		for i := range n {
			j := d*11 + i*3
			gw.Store.RecordGeneration(store.Generation{
				ID: llm.NewID("chatcmpl-", 24), AccountID: k.AccountID, KeyID: keyID,
				Application: apps[j%len(apps)], Surface: string(surfaces[j%len(surfaces)]), Model: "svc-fusion",
				RequestType: string(types[j%len(types)]), Tier: "medium", Streamed: j%2 == 0, FinishReason: "stop",
				PromptTokens: 200 + j*13, CompletionTokens: 80 + j*7,
				Cost:      money.Micros(800 + j*97),
				LatencyMS: int64(180 + j*9), GenerationTimeMS: int64(400 + j*21),
				CreatedAt: today.AddDate(0, 0, -d).Add(time.Duration(8+i) * time.Hour),
			})
		}
	}
	for i, body := range []string{
		`{"model":"svc-fusion","messages":[{"role":"user","content":"Hello"}]}`,
		`{"model":"svc-saver","messages":[{"role":"user","content":"Summarise this"}]}`,
		`{"model":"svc-fusion","messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`,
	} {
		resp, out := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", body, "Authorization", "Bearer "+key, "X-Title", apps[i])
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, out)
		}
	}
	if err := gw.Store.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// apiGet GETs an account path with key and decodes the JSON.
func apiGet[T any](t *testing.T, gw *testGateway, key, path string) T {
	t.Helper()
	var v T
	resp, body := gw.do(t, http.MethodGet, path, "", "Authorization", "Bearer "+key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

type listItem struct {
	ID       string `json:"id"`
	Feedback struct {
		Up, Down int
		Review   *struct{ Rating, Comment string }
	} `json:"feedback"`
}

type listBody struct {
	Data    []listItem `json:"data"`
	LastID  string     `json:"last_id"`
	HasMore bool       `json:"has_more"`
}

func (l listBody) ids() []string {
	ids := make([]string, len(l.Data))
	for i, d := range l.Data {
		ids[i] = d.ID
	}
	return ids
}

// screenshot saves a full-page PNG of tab as name in the test's artifact
// directory, and in $SVCGW_DASHBOARD_SCREENSHOTS when set.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv(screenshotsEnv); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatalf("save screenshot: %v", err)
		}
	}
	t.Logf("screenshot %s: %d bytes in %s", name, len(png), strings.Join(dirs, ", "))
}

func emulateDark(dark bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tt *chromedp.Target) error {
		scheme := "light"
		if dark {
			scheme = "dark"
		}
		_, err := cdp.Call(ctx, tt, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

func TestDashboard_InABrowser(t *testing.T) {
	browser := newBrowser(t)
	gw := newTestGateway(t)
	seedDashboard(t, gw, gw.Key, gw.KeyID)
	ready := `document.body.dataset.state === 'ready'`

	t.Run("sign in shows the balance the API reports", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", gw.Key)
		waitFor(t, tab, "the signed-in page", ready)
		credits := apiGet[struct {
			Balance, TotalUsed string
			SpendThisMonth     string `json:"spend_this_month"`
		}](t, gw, gw.Key, "/svc/v1/credits")
		is := is.New(t)
		is.Equal(eval[string](t, tab, `document.getElementById('balance').title`), credits.Balance+" USD")
		is.Equal(eval[string](t, tab, `document.getElementById('spend-month').title`), credits.SpendThisMonth+" USD")
		// The balance to the micro-dollar, as the API reports it (its
		// trailing zeros aside): a call's cost off $10.00 shows.
		shown := eval[string](t, tab, `document.getElementById('balance').textContent`)
		want := strings.TrimRight(credits.Balance, "0")
		if i := strings.IndexByte(want, '.'); len(want)-i < 3 {
			want += strings.Repeat("0", 3-(len(want)-i))
		}
		is.Equal(strings.ReplaceAll(shown, ",", ""), "$"+want)
		is.True(credits.Balance != "10.000000" && shown != "$10.00") // the seeded calls cost something
		is.Equal(eval[string](t, tab, `document.getElementById('key-id').textContent`), gw.KeyID)
		// The key is in this tab's sessionStorage and nowhere else.
		is.Equal(eval[string](t, tab, `sessionStorage.getItem('svcgw.key')`), gw.Key)
		is.Equal(eval[int](t, tab, `localStorage.length`), 0)
		is.Equal(eval[string](t, tab, `document.cookie`), "")
		is.True(!strings.Contains(eval[string](t, tab, `location.href`), gw.Key))
		// The chart drew the last 30 days, and the totals are the API's.
		usage := apiGet[struct {
			Total struct{ Requests int64 }
		}](t, gw, gw.Key, "/svc/v1/usage?start_date="+time.Now().UTC().AddDate(0, 0, -29).Format(time.DateOnly))
		is.Equal(eval[string](t, tab, `document.getElementById('total-requests').textContent`), fmt.Sprint(usage.Total.Requests))
		is.True(eval[bool](t, tab, `!!document.querySelector('#chart canvas')`))
		t.Logf("interactive %s ms after sign-in", eval[string](t, tab, `document.body.dataset.tti`))

		// A reload of the tab stays signed in; the /svc/dashboard path is the same page.
		do(t, tab, "reload", chromedp.Navigate(gw.URL+"/svc/dashboard"))
		waitFor(t, tab, "signed in again from sessionStorage", ready)
	})

	t.Run("switch the chart grouping", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", gw.Key)
		waitFor(t, tab, "the signed-in page", ready)
		start := time.Now().UTC().AddDate(0, 0, -29).Format(time.DateOnly)
		for _, axis := range []string{"request_type", "application"} {
			setSelect(t, tab, "group", axis)
			report := apiGet[struct {
				Data []struct{ Bucket string }
			}](t, gw, gw.Key, "/svc/v1/usage?group_by="+axis+"&start_date="+start)
			var want []string
			for _, b := range report.Data {
				want = append(want, b.Bucket)
			}
			slices.Sort(want)
			// One stacked series per bucket the API reports, named as it.
			labels := `[...document.querySelectorAll('#legend li > span:first-of-type')].map(e => e.textContent).sort()`
			wantJSON, _ := json.Marshal(want)
			waitFor(t, tab, "a legend of "+axis, fmt.Sprintf(`JSON.stringify(%s) === %q && !document.getElementById('usage').hasAttribute('aria-busy')`, labels, wantJSON))
		}
		// Requests instead of spend: the totals stay, the legend counts calls.
		do(t, tab, "show requests", chromedp.Click(chromedp.CSS(`[data-metric=requests]`)))
		is.New(t).Equal(eval[string](t, tab, `document.querySelector('[data-metric=requests]').getAttribute('aria-pressed')`), "true")
		is.New(t).True(!strings.Contains(eval[string](t, tab, `document.getElementById('legend').textContent`), "$"))
	})

	t.Run("page through calls", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", gw.Key)
		waitFor(t, tab, "the signed-in page", ready)
		rows := `[...document.querySelectorAll('#calls-body tr')].map(r => r.dataset.id)`
		page1 := apiGet[listBody](t, gw, gw.Key, "/svc/v1/generations?limit=25")
		page2 := apiGet[listBody](t, gw, gw.Key, "/svc/v1/generations?limit=25&before="+url.QueryEscape(page1.LastID))
		is := is.New(t)
		// showing waits until the table shows exactly ids: each step's
		// first row may be the same as the last step's.
		showing := func(what string, ids []string) {
			t.Helper()
			want, _ := json.Marshal(ids)
			waitFor(t, tab, what, fmt.Sprintf(`JSON.stringify(%s) === %q && !document.getElementById('calls-card').hasAttribute('aria-busy')`, rows, want))
		}
		is.Equal(eval[[]string](t, tab, rows), page1.ids()) // the newest calls first
		do(t, tab, "older", chromedp.Click(chromedp.CSS("#older")))
		showing("page 2", page2.ids())
		is.True(strings.HasPrefix(eval[string](t, tab, `document.getElementById('page-info').textContent`), "Page 2"))
		do(t, tab, "newer", chromedp.Click(chromedp.CSS("#newer")))
		showing("page 1 again", page1.ids())
		is.True(eval[bool](t, tab, `document.getElementById('newer').disabled`))

		// A filter: only code calls, as the API lists them.
		setSelect(t, tab, "f-type", "code")
		code := apiGet[listBody](t, gw, gw.Key, "/svc/v1/generations?limit=25&request_type=code")
		is.True(len(code.Data) > 0 && len(code.Data) < len(page1.Data)+1)
		showing("only code calls", code.ids())
		// Both filters, then an application nobody called from.
		setSelect(t, tab, "f-app", "notebook")
		both := apiGet[listBody](t, gw, gw.Key, "/svc/v1/generations?limit=25&request_type=code&application=notebook")
		is.True(len(both.Data) > 0 && len(both.Data) < len(code.Data)+1)
		showing("only code calls of notebook", both.ids())
		setSelect(t, tab, "f-app", "no-such-app")
		showing("no calls", []string{})
		is.Equal(eval[string](t, tab, `document.getElementById('calls-empty').textContent`), "No calls match these filters.")
	})

	t.Run("rate a call and the feedback is stored", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", gw.Key)
		waitFor(t, tab, "the signed-in page", ready)
		id := eval[string](t, tab, `document.querySelector('#calls-body tr').dataset.id`)
		// By keyboard: focus the first call, Enter opens it.
		do(t, tab, "open the call",
			chromedp.Focus(chromedp.CSS("#calls-body tr button")),
			chromedp.KeyEvent("\r"),
			chromedp.WaitVisible(chromedp.CSS("#detail")),
		)
		is := is.New(t)
		is.Equal(eval[string](t, tab, `document.getElementById('detail-id').textContent`), id)
		do(t, tab, "review it",
			chromedp.Click(chromedp.CSS(`#feedback [data-rating=down]`)),
			chromedp.SendKeys(chromedp.CSS("#fb-comment"), "answered the wrong question"),
			chromedp.Click(chromedp.CSS("#fb-save")),
		)
		waitFor(t, tab, "saved", `document.getElementById('fb-status').textContent === 'Saved.'`)
		list := apiGet[listBody](t, gw, gw.Key, "/svc/v1/generations?limit=5")
		i := slices.IndexFunc(list.Data, func(d listItem) bool { return d.ID == id })
		is.True(i >= 0)
		is.True(list.Data[i].Feedback.Review != nil) // stored
		is.Equal(list.Data[i].Feedback.Review.Rating, "down")
		is.Equal(list.Data[i].Feedback.Review.Comment, "answered the wrong question")
		is.Equal(list.Data[i].Feedback.Down, 1)
		// Escape closes the dialog; the table shows the review.
		do(t, tab, "close", chromedp.KeyEvent("\x1b"), chromedp.WaitNotVisible(chromedp.CSS("#detail")))
		waitFor(t, tab, "the review in the table", fmt.Sprintf(`document.querySelector('#calls-body tr[data-id=%q] .rating').textContent.includes('▼ you')`, id))
	})

	t.Run("a wrong key shows the error state", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", "llm_live_notakey")
		waitFor(t, tab, "the error", `!document.getElementById('signin-error').hidden`)
		is := is.New(t)
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('signin-error').textContent`), "not accepted"))
		is.True(eval[bool](t, tab, `document.getElementById('app').hidden`))
		is.Equal(eval[any](t, tab, `sessionStorage.getItem('svcgw.key')`), nil) // a refused key is not kept
	})

	t.Run("a key revoked while signed in signs out", func(t *testing.T) {
		key, keyID := gw.newKey(t, "acme", "")
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", key)
		waitFor(t, tab, "the signed-in page", ready)
		if _, err := gw.Store.RevokeKey(context.Background(), keyID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(store.DefaultAuthCacheTTL + 100*time.Millisecond) // the server's authentication cache
		setSelect(t, tab, "group", "api_key")
		waitFor(t, tab, "the revoked state", `!document.getElementById('signin').hidden && !document.getElementById('signin-error').hidden`)
		is := is.New(t)
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('signin-error').textContent`), "revoked"))
		is.Equal(eval[any](t, tab, `sessionStorage.getItem('svcgw.key')`), nil)
	})

	t.Run("an empty account", func(t *testing.T) {
		key, _ := gw.newKey(t, "newcomer", "5")
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/svc/dashboard", key)
		waitFor(t, tab, "the signed-in page", ready)
		is := is.New(t)
		is.True(!eval[bool](t, tab, `document.getElementById('chart-empty').hidden`))
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('calls-empty').textContent`), "No calls yet"))
		is.Equal(eval[string](t, tab, `document.getElementById('balance').textContent`), "$5.00")
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('snippet').textContent`), gw.URL+"/svc/v1/chat/completions"))
	})

	t.Run("the gateway going away shows the network error", func(t *testing.T) {
		// A second listener on the same gateway, closed under the page.
		hs := httptest.NewServer(gw.Server)
		defer hs.Close()
		tab := newTab(t, browser)
		signIn(t, tab, hs.URL, "/", gw.Key)
		waitFor(t, tab, "the signed-in page", ready)
		hs.CloseClientConnections()
		hs.Close()
		setSelect(t, tab, "group", "request_type")
		waitFor(t, tab, "the banner", `!document.getElementById('banner').hidden`)
		is := is.New(t)
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('banner-text').textContent`), "Cannot reach the gateway"))
		is.True(!eval[bool](t, tab, `document.getElementById('app').hidden`)) // what was shown stays
	})

	t.Run("screenshots", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, gw.URL, "/", gw.Key)
		waitFor(t, tab, "the signed-in page", ready)
		setSelect(t, tab, "group", "request_type")
		waitFor(t, tab, "the stacked chart", `document.querySelectorAll('#legend li').length > 1 && !document.getElementById('usage').hasAttribute('aria-busy')`)
		screenshot(t, tab, "dashboard-light.png")
		do(t, tab, "dark", emulateDark(true))
		waitFor(t, tab, "dark colours", `getComputedStyle(document.body).backgroundColor === 'rgb(15, 18, 22)'`)
		screenshot(t, tab, "dashboard-dark.png")
		do(t, tab, "phone", emulateDark(false), chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		waitFor(t, tab, "one column", `document.querySelector('.stats').getBoundingClientRect().width < 400`)
		is := is.New(t)
		is.True(eval[bool](t, tab, `document.documentElement.scrollWidth <= window.innerWidth`)) // nothing wider than the phone
		screenshot(t, tab, "dashboard-phone.png")
	})
}
