package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/store"
)

// adminGateway is a test gateway with its admin listener served too, and
// two admin tokens: ops (read-write) and viewer (read-only).
type adminGateway struct {
	*testGateway
	AdminURL string
	Ops      string
	Viewer   string
}

func newAdminGateway(t *testing.T) *adminGateway {
	t.Helper()
	gw := newTestGateway(t)
	hs := httptest.NewServer(gw.Server.Admin(AdminOptions{}))
	t.Cleanup(hs.Close)
	ctx := context.Background()
	ops, _, err := gw.Store.CreateAdminToken(ctx, "ops", false)
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, err := gw.Store.CreateAdminToken(ctx, "viewer", true)
	if err != nil {
		t.Fatal(err)
	}
	return &adminGateway{testGateway: gw, AdminURL: hs.URL, Ops: ops, Viewer: viewer}
}

// admin sends a request to the management API with token and decodes the
// JSON answer into a T; it fails the test unless the status is want.
func adminCall[T any](t *testing.T, gw *adminGateway, token, method, path, body string, want int) T {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, gw.AdminURL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return v
}

type adminAccount struct {
	Name, Balance string
	SpendToday    string  `json:"spend_today"`
	DailyCap      *string `json:"daily_cap"`
}

type adminKey struct {
	ID, Name, Status string
	DailyLimit       *string `json:"daily_limit"`
}

type adminCredit struct {
	ID, Amount, Reference, Actor string
}

type adminAudit struct {
	ID, Actor, Action, Target string
}

type adminList[T any] struct {
	Data    []T
	HasMore bool `json:"has_more"`
}

// signInOperator opens the operator's page and signs in with token.
func signInOperator(t *testing.T, tab context.Context, gw *adminGateway, token string) {
	t.Helper()
	do(t, tab, "open the operator's page",
		chromedp.Navigate(gw.AdminURL+"/admin/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token+"\r"),
	)
}

// rowsOf is a JavaScript expression: the data-attr of each row of a table body.
func rowsOf(body, attr string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#%s tr')].map(r => r.dataset.%s)`, body, attr)
}

func TestOperator_InABrowser(t *testing.T) {
	browser := newBrowser(t)
	gw := newAdminGateway(t)
	seedDashboard(t, gw.testGateway, gw.Key, gw.KeyID)
	for i, name := range []string{"beta-lab", "course-101", "zeta"} {
		gw.newKey(t, name, fmt.Sprint(5*(i+1)))
	}
	ready := `document.body.dataset.state === 'ready'`

	t.Run("sign in and list accounts", func(t *testing.T) {
		tab := newTab(t, browser)
		signInOperator(t, tab, gw, gw.Ops)
		waitFor(t, tab, "the accounts", ready+` && !document.getElementById('view-accounts').hidden`)
		is := is.New(t)
		list := adminCall[adminList[adminAccount]](t, gw, gw.Ops, "GET", "/admin/v1/accounts?limit=50", "", 200)
		var names []string
		for _, a := range list.Data {
			names = append(names, a.Name)
		}
		is.Equal(eval[[]string](t, tab, rowsOf("accounts-body", "name")), names) // as the API lists them
		i := slices.IndexFunc(list.Data, func(a adminAccount) bool { return a.Name == "acme" })
		is.True(i >= 0)
		is.Equal(eval[string](t, tab, `document.querySelector('#accounts-body tr[data-name=acme] td:nth-child(2)').title`), list.Data[i].Balance+" USD")
		is.Equal(eval[string](t, tab, `document.getElementById('token-name').textContent`), "ops")
		// The token is in this tab's sessionStorage and nowhere else.
		is.Equal(eval[string](t, tab, `sessionStorage.getItem('svcgw.admin-token')`), gw.Ops)
		is.Equal(eval[int](t, tab, `localStorage.length`), 0)
		is.Equal(eval[string](t, tab, `document.cookie`), "")
		is.True(!strings.Contains(eval[string](t, tab, `location.href`), gw.Ops))
		// Top spenders: acme, the only account with calls, over 30 days.
		waitFor(t, tab, "top spenders", `document.querySelectorAll('#top-list li').length > 0`)
		is.Equal(eval[[]string](t, tab, `[...document.querySelectorAll('#top-list li')].map(l => l.dataset.name)`), []string{"acme"})
		// Today only: the seeded month is before today, the real calls today.
		setSelect(t, tab, "top-range", "1")
		today := adminCall[struct {
			Data []struct{ Bucket, Cost string }
		}](t, gw, gw.Ops, "GET", "/admin/v1/usage?group_by=account&start_date="+time.Now().UTC().Format(time.DateOnly), "", 200)
		is.Equal(len(today.Data), 1)
		waitFor(t, tab, "today's spend", fmt.Sprintf(`document.querySelector('#top-list li span[title]') && document.querySelector('#top-list li span[title]').title === %q`, today.Data[0].Cost+" USD"))
		// A reload of the tab stays signed in.
		do(t, tab, "reload", chromedp.Reload())
		waitFor(t, tab, "signed in again from sessionStorage", ready)
	})

	t.Run("keys, credits with a double submit, revoke, audit", func(t *testing.T) {
		tab := newTab(t, browser)
		signInOperator(t, tab, gw, gw.Ops)
		waitFor(t, tab, "the accounts", ready)
		do(t, tab, "open acme", chromedp.Click(chromedp.CSS(`#accounts-body tr[data-name=acme] a`)))
		waitFor(t, tab, "acme's page", ready+` && !document.getElementById('view-account').hidden && document.getElementById('a-name').textContent === 'acme'`)
		is := is.New(t)
		is.True(eval[bool](t, tab, `!!document.querySelector('#chart canvas')`)) // the usage chart
		usage := adminCall[struct{ Total struct{ Requests int64 } }](t, gw, gw.Ops, "GET",
			"/admin/v1/usage?group_by=day&account=acme&start_date="+time.Now().UTC().AddDate(0, 0, -29).Format(time.DateOnly), "", 200)
		is.Equal(eval[string](t, tab, `document.getElementById('total-requests').textContent`), fmt.Sprint(usage.Total.Requests))

		// Create a key: its secret is shown once, and it works.
		do(t, tab, "create a key",
			chromedp.SendKeys(chromedp.CSS("#nk-name"), "webhook"),
			chromedp.SendKeys(chromedp.CSS("#nk-daily"), "2"),
			chromedp.Click(chromedp.CSS(`#new-key button[type=submit]`)),
		)
		waitFor(t, tab, "the secret", `!document.getElementById('secret').hidden`)
		secret := eval[string](t, tab, `document.getElementById('secret-value').textContent`)
		is.True(strings.HasPrefix(secret, "llm_live_"))
		resp, body := gw.do(t, http.MethodGet, "/svc/v1/credits", "", "Authorization", "Bearer "+secret)
		is.Equal(resp.StatusCode, http.StatusOK) // the new key calls the gateway
		keys := adminCall[adminList[adminKey]](t, gw, gw.Ops, "GET", "/admin/v1/accounts/acme/keys", "", 200)
		k := keys.Data[slices.IndexFunc(keys.Data, func(k adminKey) bool { return k.Name == "webhook" })]
		is.Equal(*k.DailyLimit, "2.000000")
		waitFor(t, tab, "the key in the table", fmt.Sprintf(`!!document.querySelector('#keys-body tr[data-id=%q]')`, k.ID))
		is.True(!strings.Contains(eval[string](t, tab, `document.getElementById('keys-body').textContent`), secret)) // never in the list
		_ = body

		// Add credits: the form submitted twice at once (a double click
		// past the disabled button, Enter pressed twice) sends the same
		// Idempotency-Key twice, and the account is credited once.
		before := adminCall[adminAccount](t, gw, gw.Ops, "GET", "/admin/v1/accounts/acme", "", 200)
		eval[chromedp.Void](t, tab, `(() => {
			window.creditPosts = [];
			const f = window.fetch;
			window.fetch = (url, init) => {
				const p = f(url, init);
				if (init && init.method === 'POST' && String(url).endsWith('/credits')) {
					const rec = { key: init.headers['Idempotency-Key'], done: false };
					window.creditPosts.push(rec);
					p.finally(() => { rec.done = true; });
				}
				return p;
			};
		})()`)
		do(t, tab, "fill the credit form",
			chromedp.SendKeys(chromedp.CSS("#cr-amount"), "5.00"),
			chromedp.SendKeys(chromedp.CSS("#cr-ref"), "stripe:pi_double"),
		)
		eval[chromedp.Void](t, tab, `(() => { const f = document.getElementById('credit-form'); f.requestSubmit(); f.requestSubmit(); })()`)
		waitFor(t, tab, "both submits answered", `window.creditPosts.length === 2 && window.creditPosts.every(p => p.done) && !document.getElementById('cr-submit').disabled`)
		posts := eval[[]struct{ Key string }](t, tab, `window.creditPosts`)
		is.Equal(posts[0].Key, posts[1].Key) // one entry, one key
		is.True(posts[0].Key != "")
		after := adminCall[adminAccount](t, gw, gw.Ops, "GET", "/admin/v1/accounts/acme", "", 200)
		is.Equal(sub(t, after.Balance, before.Balance), "5.000000") // credited once
		credits := adminCall[adminList[adminCredit]](t, gw, gw.Ops, "GET", "/admin/v1/accounts/acme/credits", "", 200)
		n := 0
		for _, c := range credits.Data {
			if c.Reference == "stripe:pi_double" {
				n++
				is.Equal(c.Actor, "ops")
			}
		}
		is.Equal(n, 1)
		waitFor(t, tab, "the credit in the history", fmt.Sprintf(`document.querySelector('#credits-body tr').dataset.id === %q`, credits.Data[0].ID))

		// A second credit, a new entry: credited too.
		do(t, tab, "add credits again",
			chromedp.SendKeys(chromedp.CSS("#cr-amount"), "2.50"),
			chromedp.SendKeys(chromedp.CSS("#cr-note"), "goodwill"),
			chromedp.Click(chromedp.CSS("#cr-submit")),
		)
		waitFor(t, tab, "the second credit", `window.creditPosts.length === 3 && window.creditPosts[2].done && document.getElementById('cr-status').textContent.startsWith('Credited $2.50')`)
		is.True(eval[string](t, tab, `window.creditPosts[2].key`) != posts[0].Key) // another entry, another key
		again := adminCall[adminAccount](t, gw, gw.Ops, "GET", "/admin/v1/accounts/acme", "", 200)
		is.Equal(sub(t, again.Balance, before.Balance), "7.500000")
		waitFor(t, tab, "the balance shown", fmt.Sprintf(`document.getElementById('a-balance').title === %q`, again.Balance+" USD"))

		// Revoke the new key (the confirmation answered yes).
		eval[chromedp.Void](t, tab, `window.confirm = () => true`)
		do(t, tab, "revoke", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#keys-body tr[data-id=%q] button[data-action=revoke]`, k.ID))))
		waitFor(t, tab, "the key revoked", fmt.Sprintf(`document.querySelector('#keys-body tr[data-id=%q]').classList.contains('revoked')`, k.ID))
		keys = adminCall[adminList[adminKey]](t, gw, gw.Ops, "GET", "/admin/v1/accounts/acme/keys", "", 200)
		is.Equal(keys.Data[slices.IndexFunc(keys.Data, func(x adminKey) bool { return x.ID == k.ID })].Status, "revoked")
		time.Sleep(store.DefaultAuthCacheTTL + 100*time.Millisecond) // the server's authentication cache
		resp, _ = gw.do(t, http.MethodGet, "/svc/v1/credits", "", "Authorization", "Bearer "+secret)
		is.Equal(resp.StatusCode, http.StatusUnauthorized) // refused from now on

		// The audit log shows each change, by ops, as the API lists them.
		do(t, tab, "open the audit log", chromedp.Click(chromedp.CSS("#nav-audit")))
		waitFor(t, tab, "the audit log", ready+` && !document.getElementById('view-audit').hidden`)
		audit := adminCall[adminList[adminAudit]](t, gw, gw.Ops, "GET", "/admin/v1/audit?limit=50", "", 200)
		var ids, actions []string
		for _, e := range audit.Data {
			ids = append(ids, e.ID)
			if e.Actor == "ops" {
				actions = append(actions, e.Action+" "+e.Target)
			}
		}
		is.Equal(eval[[]string](t, tab, rowsOf("audit-body", "id")), ids)
		for _, want := range []string{store.AuditKeyRevoke, store.AuditCreditsAdd, store.AuditKeyCreate} {
			is.True(slices.ContainsFunc(actions, func(a string) bool { return strings.HasPrefix(a, want+" ") })) // by ops
		}
		is.Equal(len(slices.DeleteFunc(slices.Clone(actions), func(a string) bool { return !strings.HasPrefix(a, store.AuditCreditsAdd) })), 2) // two credits, not three
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('audit-body').textContent`), store.AuditKeyRevoke))
	})

	t.Run("an account's requests and tokens per minute: set, shown, refused, cleared", func(t *testing.T) {
		tab := newTab(t, browser)
		signInOperator(t, tab, gw, gw.Ops)
		waitFor(t, tab, "the accounts", ready)
		is := is.New(t)
		is.Equal(eval[string](t, tab, `document.querySelector('#accounts-body tr[data-name=zeta] td.rates').textContent`), "none / none")
		do(t, tab, "open zeta", chromedp.Click(chromedp.CSS(`#accounts-body tr[data-name=zeta] a`)))
		waitFor(t, tab, "zeta's page", ready+` && !document.getElementById('view-account').hidden && document.getElementById('a-name').textContent === 'zeta'`)
		is.Equal(eval[string](t, tab, `document.getElementById('a-rpm').textContent`), "No request limit")
		is.Equal(eval[string](t, tab, `document.getElementById('a-tpm').textContent`), "No token limit")
		ctx := context.Background()
		row := func() store.Account {
			a, err := gw.Store.AccountByName(ctx, "zeta")
			is.NoErr(err)
			return a
		}
		saved := `document.getElementById('caps-status').textContent === 'Saved.'`
		status := `document.getElementById('caps-status')`

		// Set: 60 requests and 12,000 tokens a minute, the caps kept.
		do(t, tab, "set the rates",
			chromedp.SendKeys(chromedp.CSS("#cap-daily"), "3"),
			chromedp.SendKeys(chromedp.CSS("#cap-rpm"), "60"),
			chromedp.SendKeys(chromedp.CSS("#cap-tpm"), "12000"),
			chromedp.Click(chromedp.CSS(`#caps-form button[type=submit]`)),
		)
		waitFor(t, tab, "saved", saved)
		a := row()
		is.True(a.RPM != nil && *a.RPM == 60)     // in the store
		is.True(a.TPM != nil && *a.TPM == 12000)  // in the store
		is.Equal(a.DailyCap.String(), "3.000000") // the cap saved alongside
		is.Equal(eval[string](t, tab, `document.getElementById('a-rpm').textContent`), "60 requests")
		is.Equal(eval[string](t, tab, `document.getElementById('a-tpm').textContent`), "12,000 tokens")
		is.Equal(eval[string](t, tab, `document.getElementById('cap-tpm').value`), "12000")
		api := adminCall[struct {
			RPM *int64 `json:"rpm"`
			TPM *int64 `json:"tpm"`
		}](t, gw, gw.Ops, "GET", "/admin/v1/accounts/zeta", "", 200)
		is.Equal(*api.RPM, int64(60)) // as the API shows it
		is.Equal(*api.TPM, int64(12000))

		// Not a whole number: refused on the page, nothing sent.
		do(t, tab, "a bad rate",
			chromedp.SetValue(chromedp.CSS("#cap-rpm"), "1.5"),
			chromedp.Click(chromedp.CSS(`#caps-form button[type=submit]`)),
		)
		waitFor(t, tab, "the page's error", status+`.classList.contains('err')`)
		is.True(strings.Contains(eval[string](t, tab, status+`.textContent`), "whole number"))
		is.Equal(*row().RPM, int64(60)) // unchanged
		// A value the API refuses: its message shown.
		do(t, tab, "a bad cap",
			chromedp.SetValue(chromedp.CSS("#cap-rpm"), "60"),
			chromedp.SetValue(chromedp.CSS("#cap-daily"), "-1"),
			chromedp.Click(chromedp.CSS(`#caps-form button[type=submit]`)),
		)
		waitFor(t, tab, "the API's error", status+`.classList.contains('err') && !`+status+`.textContent.includes('whole number')`)
		t.Logf("the API's refusal as shown: %q", eval[string](t, tab, status+`.textContent`))
		is.Equal(row().DailyCap.String(), "3.000000") // unchanged

		// The list shows the account's rates too.
		do(t, tab, "back to the list", chromedp.Click(chromedp.CSS(`#view-account a.back`)))
		waitFor(t, tab, "the accounts", ready+` && !document.getElementById('view-accounts').hidden`)
		is.Equal(eval[string](t, tab, `document.querySelector('#accounts-body tr[data-name=zeta] td.rates').textContent`), "60 / 12,000")

		// Cleared: empty fields remove them (null), and the cap.
		do(t, tab, "open zeta again", chromedp.Click(chromedp.CSS(`#accounts-body tr[data-name=zeta] a`)))
		waitFor(t, tab, "zeta's page", ready+` && !document.getElementById('view-account').hidden && document.getElementById('cap-rpm').value === '60'`)
		// (Emptied by script: chromedp's SetValue takes an empty value
		// for a failure, and Clear sets the attribute, not the field.)
		eval[chromedp.Void](t, tab, `for (const id of ['cap-daily', 'cap-rpm', 'cap-tpm']) document.getElementById(id).value = ''`)
		do(t, tab, "clear the rates", chromedp.Click(chromedp.CSS(`#caps-form button[type=submit]`)))
		waitFor(t, tab, "saved", saved)
		a = row()
		is.True(a.RPM == nil) // removed in the store
		is.True(a.TPM == nil)
		is.True(a.DailyCap == nil)
		is.Equal(eval[string](t, tab, `document.getElementById('a-rpm').textContent`), "No request limit")
		is.Equal(eval[string](t, tab, `document.getElementById('a-tpm').textContent`), "No token limit")
	})

	t.Run("a read-only token sees everything and no write control", func(t *testing.T) {
		tab := newTab(t, browser)
		adminCall[map[string]any](t, gw, gw.Ops, "PATCH", "/admin/v1/accounts/acme", `{"rpm":120}`, http.StatusOK)
		signInOperator(t, tab, gw, gw.Viewer)
		waitFor(t, tab, "the accounts", ready)
		is := is.New(t)
		is.Equal(eval[string](t, tab, `document.getElementById('token-mode').textContent`), "read-only")
		is.Equal(eval[string](t, tab, `document.querySelector('#accounts-body tr[data-name=acme] td.rates').textContent`), "120 / none")
		is.True(eval[int](t, tab, `document.querySelectorAll('#accounts-body tr').length`) >= 4)
		do(t, tab, "open acme", chromedp.Click(chromedp.CSS(`#accounts-body tr[data-name=acme] a`)))
		waitFor(t, tab, "acme's page", ready+` && !document.getElementById('view-account').hidden`)
		is.True(eval[int](t, tab, `document.querySelectorAll('#keys-body tr').length`) >= 2)
		is.True(eval[int](t, tab, `document.querySelectorAll('#credits-body tr').length`) >= 2)
		// No form that changes anything, no button on a key.
		is.Equal(eval[int](t, tab, `document.querySelectorAll('.write, #credit-form, #new-key, #caps-form, #cap-rpm, #cap-tpm, #new-account, [data-action]').length`), 0)
		// The account's rates are shown all the same.
		is.Equal(eval[string](t, tab, `document.getElementById('a-rpm').textContent`), "120 requests")
		is.Equal(eval[string](t, tab, `document.getElementById('a-tpm').textContent`), "No token limit")
		// And the API refuses the token's writes anyway.
		adminCall[map[string]any](t, gw, gw.Viewer, "POST", "/admin/v1/accounts/acme/credits", `{"amount":"1.00"}`, http.StatusForbidden)
	})

	t.Run("a wrong token is refused", func(t *testing.T) {
		tab := newTab(t, browser)
		signInOperator(t, tab, gw, "adm_notatoken")
		waitFor(t, tab, "the error", `!document.getElementById('signin-error').hidden`)
		is := is.New(t)
		is.True(strings.Contains(eval[string](t, tab, `document.getElementById('signin-error').textContent`), "not accepted"))
		is.Equal(eval[any](t, tab, `sessionStorage.getItem('svcgw.admin-token')`), nil)
	})

	t.Run("screenshots", func(t *testing.T) {
		adminCall[map[string]any](t, gw, gw.Ops, "PATCH", "/admin/v1/accounts/acme", `{"rpm":120,"tpm":200000}`, http.StatusOK)
		tab := newTab(t, browser)
		do(t, tab, "viewport", chromedp.EmulateViewport(1280, 900))
		signInOperator(t, tab, gw, gw.Ops)
		waitFor(t, tab, "the accounts", ready+` && document.querySelectorAll('#top-list li').length > 0`)
		screenshot(t, tab, "operator-accounts.png")
		do(t, tab, "acme", chromedp.Click(chromedp.CSS(`#accounts-body tr[data-name=acme] a`)))
		waitFor(t, tab, "acme's page", ready+` && !document.getElementById('view-account').hidden`)
		screenshot(t, tab, "operator-account.png")
		do(t, tab, "audit", chromedp.Click(chromedp.CSS("#nav-audit")))
		waitFor(t, tab, "the audit log", ready+` && !document.getElementById('view-audit').hidden`)
		screenshot(t, tab, "operator-audit.png")
	})
}

// sub is a − b, amounts in USD as the API writes them.
func sub(t *testing.T, a, b string) string {
	t.Helper()
	x, _, err := apd.NewFromString(a)
	if err != nil {
		t.Fatal(err)
	}
	y, _, err := apd.NewFromString(b)
	if err != nil {
		t.Fatal(err)
	}
	var d apd.Decimal
	if _, err := apd.BaseContext.Sub(&d, x, y); err != nil {
		t.Fatal(err)
	}
	return d.Text('f')
}
