package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/cockroachdb/apd/v3"
	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	oaserrors "github.com/pb33f/libopenapi-validator/errors"
	"google.golang.org/genai"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
	"github.com/svcgw/svcgw/surfaces/admin"
)

// adminClient calls a gateway's management API and checks every request
// and answer against the OpenAPI document the API serves, with
// libopenapi-validator: a field, status or shape the document does not
// describe fails the test.
type adminClient struct {
	t     *testing.T
	url   string
	token string
	v     validator.Validator
}

// newAdminAPI serves gw's admin listener and returns a client of it with
// a new read-write admin token called name.
func newAdminAPI(t *testing.T, gw *testGateway, name string) *adminClient {
	t.Helper()
	srv := httptest.NewServer(gw.Server.Admin(AdminOptions{}))
	t.Cleanup(srv.Close)
	token, _, err := gw.Store.CreateAdminToken(store.WithActor(context.Background(), store.ActorCLI), name, false)
	if err != nil {
		t.Fatal(err)
	}
	return &adminClient{t: t, url: srv.URL, token: token, v: openAPIValidator(t)}
}

func openAPIValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(admin.OpenAPI)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("openapi.json: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("openapi.json: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	// The validator is not a rubber stamp: an account without its
	// fields is refused.
	req := httptest.NewRequest(http.MethodGet, "/admin/v1/accounts/x", nil)
	req.Header.Set("Authorization", "Bearer t")
	bad := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"name":"x"}`)), Request: req}
	if ok, _ := v.ValidateHttpResponse(req, bad); ok {
		t.Fatal("openapi.json: an account with only a name passed validation")
	}
	return v
}

// with returns the client with another token.
func (c *adminClient) with(token string) *adminClient {
	d := *c
	d.token = token
	return &d
}

// do sends the request (body JSON-encoded unless a string or nil) and
// returns the answer's status, headers and body, decoded into out when
// not nil. Both are validated against the OpenAPI document.
func (c *adminClient) do(method, path string, body any, out any, headers ...string) (int, http.Header, []byte) {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	newReq := func() *http.Request {
		req, err := http.NewRequest(method, c.url+path, bytes.NewReader(raw))
		if err != nil {
			c.t.Fatal(err)
		}
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return req
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	// The validator reads the bodies: give it copies.
	resp.Body = io.NopCloser(bytes.NewReader(got))
	vreq := newReq()
	var verrs []*oaserrors.ValidationError
	if resp.StatusCode >= 300 {
		// A refused request may be one the document does not allow (the
		// test made it bad on purpose): check the answer alone.
		_, verrs = c.v.ValidateHttpResponse(vreq, resp)
	} else {
		_, verrs = c.v.ValidateHttpRequestResponse(vreq, resp)
	}
	for _, e := range verrs {
		c.t.Errorf("%s %s → %d: not as openapi.json says: %s: %s\n%s", method, path, resp.StatusCode, e.Message, e.Reason, got)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(got, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, got)
		}
	}
	return resp.StatusCode, resp.Header, got
}

// errorCode returns the code of an error body.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e admin.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error.Code
}

// TestAdminAPI_EndToEnd drives every route of the management API against a
// real gateway, validating each request and answer against the OpenAPI
// document, and checks the audit trail the changes leave. It runs on
// PostgreSQL too (TestPostgres_GatewayEndToEnd).
func TestAdminAPI_EndToEnd(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	api := newAdminAPI(t, gw, "billing")

	// Accounts.
	var acct admin.Account
	code, _, _ := api.do("POST", "/admin/v1/accounts", map[string]any{"name": "shop", "credits": "10.00"}, &acct)
	is.Equal(code, http.StatusCreated)
	is.Equal(acct.Balance, "10.000000")
	is.True(acct.DailyCap == nil)
	code, _, body := api.do("POST", "/admin/v1/accounts", map[string]any{"name": "shop"}, nil)
	is.Equal(code, http.StatusConflict) // taken
	is.Equal(errorCode(t, body), "conflict")
	code, _, body = api.do("POST", "/admin/v1/accounts", `{"name": "x", "credits": 5}`, nil)
	is.Equal(code, http.StatusBadRequest) // a number, not a string
	is.Equal(errorCode(t, body), "invalid_request")
	code, _, body = api.do("POST", "/admin/v1/accounts", map[string]any{"name": " padded"}, nil)
	is.Equal(code, http.StatusUnprocessableEntity) // the store's rule on names
	is.Equal(errorCode(t, body), "invalid_value")

	var accts admin.List[admin.Account]
	code, _, _ = api.do("GET", "/admin/v1/accounts?limit=1", nil, &accts)
	is.Equal(code, http.StatusOK)
	is.Equal(len(accts.Data), 1)
	is.Equal(accts.Data[0].Name, "acme") // the gateway's own, in name order
	is.True(accts.HasMore)
	code, _, _ = api.do("GET", "/admin/v1/accounts?limit=1&cursor="+*accts.NextCursor, nil, &accts)
	is.Equal(code, http.StatusOK)
	is.Equal(accts.Data[0].Name, "shop")
	is.True(!accts.HasMore)

	code, _, _ = api.do("PATCH", "/admin/v1/accounts/shop", map[string]any{"daily_cap": "1.50", "monthly_cap": "30"}, &acct)
	is.Equal(code, http.StatusOK)
	is.Equal(*acct.DailyCap, "1.500000")
	code, _, _ = api.do("PATCH", "/admin/v1/accounts/shop", map[string]any{"monthly_cap": nil}, &acct)
	is.Equal(code, http.StatusOK)
	is.Equal(*acct.DailyCap, "1.500000") // left out: kept
	is.True(acct.MonthlyCap == nil)      // null: removed
	code, _, body = api.do("PATCH", "/admin/v1/accounts/shop", map[string]any{"rpm_limits": 3}, nil)
	is.Equal(code, http.StatusBadRequest) // an unknown field
	is.Equal(errorCode(t, body), "invalid_request")
	// The account's requests and tokens per minute, across its keys.
	code, _, _ = api.do("PATCH", "/admin/v1/accounts/shop", map[string]any{"rpm": 600, "tpm": 100000}, &acct)
	is.Equal(code, http.StatusOK)
	is.Equal(*acct.RPM, int64(600))
	is.Equal(*acct.TPM, int64(100000))
	is.Equal(*acct.DailyCap, "1.500000") // the caps kept
	for _, bad := range []map[string]any{{"rpm": -1}, {"tpm": -5}} {
		code, _, body = api.do("PATCH", "/admin/v1/accounts/shop", bad, nil)
		is.Equal(code, http.StatusUnprocessableEntity) // the store's rule, as the CLI's
		is.Equal(errorCode(t, body), "invalid_value")
	}
	code, _, body = api.do("PATCH", "/admin/v1/accounts/shop", `{"rpm": "ten"}`, nil)
	is.Equal(code, http.StatusBadRequest) // not a number
	is.Equal(errorCode(t, body), "invalid_request")
	code, _, _ = api.do("PATCH", "/admin/v1/accounts/shop", map[string]any{"rpm": nil}, &acct)
	is.Equal(code, http.StatusOK)
	is.True(acct.RPM == nil)           // null: removed
	is.Equal(*acct.TPM, int64(100000)) // left out: kept
	code, _, _ = api.do("GET", "/admin/v1/accounts/shop", nil, &acct)
	is.Equal(code, http.StatusOK)
	is.True(acct.RPM == nil)
	is.Equal(*acct.TPM, int64(100000)) // stored
	code, _, body = api.do("GET", "/admin/v1/accounts/nobody", nil, nil)
	is.Equal(code, http.StatusNotFound)
	is.Equal(errorCode(t, body), "not_found")

	// Keys: the secret once, never again; it serves calls at once.
	var nk admin.NewKey
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	code, _, _ = api.do("POST", "/admin/v1/accounts/shop/keys",
		map[string]any{"name": "web", "daily_limit": "0.50", "rpm": 100, "expires_at": expires.Format(time.RFC3339Nano)}, &nk)
	is.Equal(code, http.StatusCreated)
	is.True(strings.HasPrefix(nk.Secret, store.SecretPrefix))
	is.Equal(*nk.ExpiresAt, expires.Format(time.RFC3339Nano))
	is.Equal(*nk.RPM, int64(100))
	resp, _ := gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody, "Authorization", "Bearer "+nk.Secret)
	is.Equal(resp.StatusCode, http.StatusOK) // the new key works
	is.NoErr(gw.Store.Sync(context.Background()))
	code, _, _ = api.do("GET", "/admin/v1/accounts/shop", nil, &acct)
	is.Equal(code, http.StatusOK)
	left, _, err := apd.NewFromString(acct.Balance)
	is.NoErr(err)
	is.True(left.Cmp(apd.New(10, 0)) < 0) // the call is charged
	var keys admin.List[admin.Key]
	code, _, body = api.do("GET", "/admin/v1/accounts/shop/keys", nil, &keys)
	is.Equal(code, http.StatusOK)
	is.Equal(len(keys.Data), 1)
	is.True(!bytes.Contains(body, []byte(nk.Secret))) // never a secret
	var k admin.Key
	code, _, _ = api.do("PATCH", "/admin/v1/keys/"+nk.ID, map[string]any{"rpm": nil, "monthly_limit": "5"}, &k)
	is.Equal(code, http.StatusOK)
	is.True(k.RPM == nil)               // back to the server's default
	is.Equal(*k.DailyLimit, "0.500000") // kept
	is.Equal(*k.MonthlyLimit, "5.000000")
	code, _, body = api.do("PATCH", "/admin/v1/keys/"+nk.ID, map[string]any{"tpm": -1}, nil)
	is.Equal(code, http.StatusUnprocessableEntity)
	is.Equal(errorCode(t, body), "invalid_value")
	code, _, body = api.do("POST", "/admin/v1/accounts/shop/keys", map[string]any{"expires_at": "2001-01-01T00:00:00Z"}, nil)
	is.Equal(code, http.StatusUnprocessableEntity) // expired already
	code, _, _ = api.do("PATCH", "/admin/v1/keys/key_0000000000000000", map[string]any{"rpm": 1}, nil)
	is.Equal(code, http.StatusNotFound)

	// Credits, with an idempotency key: once however often sent.
	var first, again admin.Credited
	credit := map[string]any{"amount": "5.00", "reference": "stripe:pi_123", "note": "top-up"}
	code, hdr, _ := api.do("POST", "/admin/v1/accounts/shop/credits", credit, &first, "Idempotency-Key", "evt_1")
	is.Equal(code, http.StatusCreated)
	want := apd.New(5, 0)
	_, err = apd.BaseContext.Add(want, want, left)
	is.NoErr(err)
	is.Equal(first.Balance, want.Text('f')) // what the call left, and the credit
	is.Equal(hdr.Get("Idempotent-Replayed"), "")
	is.Equal(first.Transaction.Actor, "billing")
	code, hdr, _ = api.do("POST", "/admin/v1/accounts/shop/credits", credit, &again, "Idempotency-Key", "evt_1")
	is.Equal(code, http.StatusCreated)
	is.Equal(again, first) // the first answer
	is.Equal(hdr.Get("Idempotent-Replayed"), "true")
	code, _, body = api.do("POST", "/admin/v1/accounts/shop/credits", map[string]any{"amount": "6.00"}, nil, "Idempotency-Key", "evt_1")
	is.Equal(code, http.StatusConflict) // the same key, another request
	is.Equal(errorCode(t, body), "idempotency_mismatch")
	code, _, body = api.do("POST", "/admin/v1/accounts/shop/credits", map[string]any{"amount": "-100"}, nil)
	is.Equal(code, http.StatusUnprocessableEntity) // never below zero
	is.Equal(errorCode(t, body), "insufficient_balance")
	code, _, body = api.do("POST", "/admin/v1/accounts/shop/credits", map[string]any{"amount": "1.0000001"}, nil)
	is.Equal(code, http.StatusBadRequest) // seven decimals
	var refund admin.Credited
	code, _, _ = api.do("POST", "/admin/v1/accounts/shop/credits", map[string]any{"amount": "-2.5", "note": "refund"}, &refund)
	is.Equal(code, http.StatusCreated)
	is.Equal(refund.Transaction.Amount, "-2.500000")
	var txs admin.List[admin.CreditTx]
	code, _, _ = api.do("GET", "/admin/v1/accounts/shop/credits?limit=2", nil, &txs)
	is.Equal(code, http.StatusOK)
	is.Equal(len(txs.Data), 2)
	is.Equal(txs.Data[0].Amount, "-2.500000") // newest first
	is.True(txs.HasMore)
	code, _, _ = api.do("GET", "/admin/v1/accounts/shop/credits?cursor="+*txs.NextCursor, nil, &txs)
	is.Equal(code, http.StatusOK)
	is.Equal(len(txs.Data), 1) // the opening credit
	is.Equal(txs.Data[0].Note, "opening credit")

	// Usage and generations, in the key holder's shapes, across accounts.
	var usage struct {
		GroupBy string `json:"group_by"`
		Data    []struct {
			Bucket   string `json:"bucket"`
			Requests int64  `json:"requests"`
		} `json:"data"`
	}
	gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody) // one call of acme's
	is.NoErr(gw.Store.Sync(context.Background()))
	code, _, _ = api.do("GET", "/admin/v1/usage?group_by=account", nil, &usage)
	is.Equal(code, http.StatusOK)
	is.Equal(usage.GroupBy, "account")
	is.Equal(len(usage.Data), 2)
	is.Equal(usage.Data[0].Bucket, "acme")
	is.Equal(usage.Data[1].Bucket, "shop")
	is.Equal(usage.Data[1].Requests, int64(1))
	code, _, _ = api.do("GET", "/admin/v1/usage?group_by=api_key&account=shop", nil, &usage)
	is.Equal(code, http.StatusOK)
	is.Equal(usage.Data[0].Bucket, nk.ID)
	code, _, _ = api.do("GET", "/admin/v1/usage?group_by=model", nil, nil)
	is.Equal(code, http.StatusBadRequest)
	var gens struct {
		Data []struct {
			ID     string `json:"id"`
			APIKey string `json:"api_key"`
		} `json:"data"`
	}
	code, _, _ = api.do("GET", "/admin/v1/generations?account=shop", nil, &gens)
	is.Equal(code, http.StatusOK)
	is.Equal(len(gens.Data), 1)
	is.Equal(gens.Data[0].APIKey, nk.ID)
	var gen struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	code, _, _ = api.do("GET", "/admin/v1/generation?id="+gens.Data[0].ID, nil, &gen)
	is.Equal(code, http.StatusOK)
	is.Equal(gen.Data.ID, gens.Data[0].ID)
	code, _, _ = api.do("GET", "/admin/v1/generation?id=gen-nope", nil, nil)
	is.Equal(code, http.StatusNotFound)

	// Revoked: refused at once.
	code, _, _ = api.do("DELETE", "/admin/v1/keys/"+nk.ID, nil, &k)
	is.Equal(code, http.StatusOK)
	is.Equal(k.Status, "revoked")
	resp, _ = gw.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody, "Authorization", "Bearer "+nk.Secret)
	is.Equal(resp.StatusCode, http.StatusUnauthorized)

	// The audit log: every change, by whom, before → after.
	var audit admin.List[admin.AuditEntry]
	code, _, body = api.do("GET", "/admin/v1/audit?limit=500", nil, &audit)
	is.Equal(code, http.StatusOK)
	is.True(!bytes.Contains(body, []byte(nk.Secret))) // no secret
	is.True(!bytes.Contains(body, []byte(api.token))) // of any kind
	var trail []string
	for _, e := range slices.Backward(audit.Data) {
		if e.Actor == "billing" {
			trail = append(trail, e.Action+" "+e.Target)
		}
	}
	is.Equal(trail, []string{
		"account.create shop", "credits.add shop", // POST accounts with credits
		"account.update shop", "account.update shop", // two PATCHes of caps
		"account.update shop", "account.update shop", // two of rate limits; the refused ones left none
		"key.create " + nk.ID, "key.update " + nk.ID,
		"credits.add shop", "credits.add shop", // the top-up (once) and the refund
		"key.revoke " + nk.ID,
	})
	last := audit.Data[0]
	is.Equal(last.Action, "key.revoke")
	is.True(bytes.Contains(last.Before, []byte(`"revoked_at":null`)))
	is.True(!bytes.Contains(last.After, []byte(`"revoked_at":null`)))
	code, _, _ = api.do("GET", "/admin/v1/audit?cursor=bogus", nil, nil)
	is.Equal(code, http.StatusBadRequest)

	code, _, _ = api.do("GET", "/admin/v1/openapi.json", nil, nil)
	is.Equal(code, http.StatusOK)
	req, _ := http.NewRequest(http.MethodGet, api.url+"/admin/v1/nothing", nil) // not in the document
	req.Header.Set("Authorization", "Bearer "+api.token)
	resp, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusNotFound)
	is.Equal(errorCode(t, body), "not_found")
}

// TestAdminAPI_TokensGuardEveryRoute: without a token every route is 401;
// a read-only token reads every route and is refused (403) on every
// change, which then leaves no trace.
func TestAdminAPI_TokensGuardEveryRoute(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)
	api := newAdminAPI(t, gw, "billing")
	roSecret, _, err := gw.Store.CreateAdminToken(context.Background(), "dashboard", true)
	is.NoErr(err)
	ro, none := api.with(roSecret), api.with("")
	_, id := gw.newKey(t, "acme", "")

	before, _, err := gw.Store.ListAudit(context.Background(), store.AuditQuery{Limit: 500})
	is.NoErr(err)
	concrete := strings.NewReplacer("{name}", "acme", "{id}", id)
	h := admin.New(gw.Store, nil, nil)
	for _, rt := range h.Routes() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = concrete.Replace(path)
		var body any
		switch method {
		case "POST":
			body = map[string]any{"amount": "1.00"}
			if strings.HasSuffix(path, "/accounts") {
				body = map[string]any{"name": "new"}
			} else if strings.HasSuffix(path, "/keys") {
				body = map[string]any{"name": "k"}
			}
		case "PATCH":
			body = map[string]any{}
		}
		if strings.HasSuffix(path, "/generations") {
			path += "?account=acme"
		}
		code, hdr, got := none.do(method, path, body, nil)
		if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s without a token: %d %s", rt.Pattern, code, got)
		}
		code, _, got = api.with(store.AdminSecretPrefix+"nope").do(method, path, body, nil)
		if code != http.StatusUnauthorized {
			t.Errorf("%s with an unknown token: %d %s", rt.Pattern, code, got)
		}
		code, _, got = ro.do(method, path, body, nil)
		switch {
		case method == "GET" && strings.HasSuffix(path, "/generation"):
			if code != http.StatusBadRequest { // no id: read, and refused for that
				t.Errorf("%s read-only: %d %s", rt.Pattern, code, got)
			}
		case method == "GET":
			if code != http.StatusOK {
				t.Errorf("%s read-only: %d %s", rt.Pattern, code, got)
			}
		default:
			if code != http.StatusForbidden || errorCode(t, got) != "forbidden" {
				t.Errorf("%s read-only: %d %s, want 403 forbidden", rt.Pattern, code, got)
			}
		}
	}
	after, _, err := gw.Store.ListAudit(context.Background(), store.AuditQuery{Limit: 500})
	is.NoErr(err)
	is.Equal(len(after), len(before)) // nothing changed
}

// TestAuth_ExpiredKeyInEachSurfaceEnvelope: a key past its expiry is
// refused with 401 in each SDK's own error, saying it expired.
func TestAuth_ExpiredKeyInEachSurfaceEnvelope(t *testing.T) {
	gw := newTestGateway(t)
	ctx := context.Background()
	secret, id := gw.newKey(t, "acme", "")
	past := time.Now().Add(-time.Minute)
	if _, err := gw.Store.UpdateKeyLimits(ctx, id, func(l *store.KeyLimits) { l.ExpiresAt = &past }); err != nil {
		t.Fatal(err)
	}
	t.Run("openai", func(t *testing.T) {
		is := is.New(t)
		c := oaiClient(gw, secret)
		_, err := c.Chat.Completions.New(ctx, oaiParams("m", "hi"))
		var ae *openai.Error
		is.True(errors.As(err, &ae))
		is.Equal(ae.StatusCode, http.StatusUnauthorized)
		is.True(strings.Contains(ae.Message, "expired"))
	})
	t.Run("anthropic", func(t *testing.T) {
		is := is.New(t)
		c := anthropic.NewClient(anthropicoption.WithBaseURL(gw.URL+"/svc"), anthropicoption.WithAPIKey(secret), anthropicoption.WithMaxRetries(0))
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: msgsUser("hi")})
		var ae *anthropic.Error
		is.True(errors.As(err, &ae))
		is.Equal(ae.StatusCode, http.StatusUnauthorized)
		is.True(strings.Contains(ae.Error(), "expired"))
		is.True(strings.Contains(ae.RawJSON(), `"authentication_error"`)) // Anthropic's envelope
	})
	t.Run("gemini", func(t *testing.T) {
		is := is.New(t)
		_, err := genaiClient(t, gw.URL+"/svc/", secret).Models.GenerateContent(ctx, "gemini-2.5-flash", genaiUserText("hi"), nil)
		var ae genai.APIError
		is.True(errors.As(err, &ae))
		is.Equal(ae.Code, http.StatusUnauthorized)
		is.Equal(ae.Status, "UNAUTHENTICATED")
		is.True(strings.Contains(ae.Message, "expired"))
	})
}

// TestPostgres_AdminAPIAcrossInstances runs two instances on one
// PostgreSQL database, each with its own management API: a key made
// through one serves calls on the other within a second, and is refused
// there within a second of its revocation through the first; a credit
// made through one is spendable on the other within a second; and one
// credit retried ten times at once across both, with one Idempotency-Key,
// counts once.
func TestPostgres_AdminAPIAcrossInstances(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	open := func() *testGateway {
		st, err := postgres.Open(ctx, dsn, store.Options{})
		is.NoErr(err)
		return newTestGateway(t, withStore(st))
	}
	a, b := open(), open()
	apiA, apiB := newAdminAPI(t, a, "billing-a"), newAdminAPI(t, b, "billing-b")

	code, _, _ := apiA.do("POST", "/admin/v1/accounts", map[string]any{"name": "shop"}, nil)
	is.Equal(code, http.StatusCreated)
	var nk admin.NewKey
	code, _, _ = apiA.do("POST", "/admin/v1/accounts/shop/keys", map[string]any{"name": "web"}, &nk)
	is.Equal(code, http.StatusCreated)
	// within polls a call on b with the key until it answers want, and
	// fails the test if that takes over a second.
	within := func(what string, want int) {
		t.Helper()
		began := time.Now()
		for {
			resp, body := b.do(t, http.MethodPost, "/svc/v1/chat/completions", chatBody, "Authorization", "Bearer "+nk.Secret)
			if resp.StatusCode == want {
				t.Logf("%s: seen on the other instance after %v", what, time.Since(began).Round(time.Millisecond))
				return
			}
			if time.Since(began) > time.Second {
				t.Fatalf("%s: the other instance still answers %d after a second: %s", what, resp.StatusCode, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	within("a new key on an empty account", http.StatusPaymentRequired) // known there, and nothing to spend
	code, _, _ = apiA.do("POST", "/admin/v1/accounts/shop/credits", map[string]any{"amount": "5.00"}, nil)
	is.Equal(code, http.StatusCreated)
	within("a credit", http.StatusOK)
	code, _, _ = apiA.do("DELETE", "/admin/v1/keys/"+nk.ID, nil, nil)
	is.Equal(code, http.StatusOK)
	within("a revocation", http.StatusUnauthorized)

	// Ten retries at once, alternating between the instances.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
	)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := []*adminClient{apiA, apiB}[i%2]
			var c admin.Credited
			code, _, body := api.do("POST", "/admin/v1/accounts/shop/credits", map[string]any{"amount": "2.00", "reference": "stripe:pi_9"}, &c,
				"Idempotency-Key", "evt_retried")
			mu.Lock()
			defer mu.Unlock()
			if code != http.StatusCreated {
				t.Errorf("retry %d: %d %s", i, code, body)
			}
			answers[c.Transaction.ID+" "+c.Balance]++
		}()
	}
	wg.Wait()
	is.Equal(len(answers), 1) // one answer, the first's, to all ten
	var txs admin.List[admin.CreditTx]
	code, _, _ = apiB.do("GET", "/admin/v1/accounts/shop/credits", nil, &txs)
	is.Equal(code, http.StatusOK)
	n := 0
	for _, tx := range txs.Data {
		if tx.Reference == "stripe:pi_9" {
			n++
		}
	}
	is.Equal(n, 1) // credited once
}
