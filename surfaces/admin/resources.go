package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// Account is an account as the API shows it. Money is USD as a string
// with six decimal places; days and months are UTC.
type Account struct {
	Name           string  `json:"name"`
	Balance        string  `json:"balance"`
	TotalUsed      string  `json:"total_used"`
	SpendToday     string  `json:"spend_today"`
	SpendThisMonth string  `json:"spend_this_month"`
	DailyCap       *string `json:"daily_cap"`   // null: none
	MonthlyCap     *string `json:"monthly_cap"` // null: none
	// RPM and TPM are the requests and tokens per minute of all of the
	// account's keys together; null (or 0): none.
	RPM       *int64 `json:"rpm"`
	TPM       *int64 `json:"tpm"`
	CreatedAt string `json:"created_at"`
}

// List is the body of every list: a page of data, and the cursor of the
// next page when there is one.
type List[T any] struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

func (h *Handler) account(r *http.Request, a store.Account) (Account, error) {
	sp, err := h.st.PeriodSpend(r.Context(), a.ID, "", h.now())
	if err != nil {
		return Account{}, err
	}
	return Account{
		Name: a.Name, Balance: usdText(a.Balance), TotalUsed: usdText(a.TotalUsed),
		SpendToday: money.Micros(sp.AccountDay).String(), SpendThisMonth: money.Micros(sp.AccountMonth).String(),
		DailyCap: optUSD(a.DailyCap), MonthlyCap: optUSD(a.MonthlyCap), RPM: a.RPM, TPM: a.TPM, CreatedAt: timeText(a.CreatedAt),
	}, nil
}

func (h *Handler) createAccount(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name    string  `json:"name"`
		Credits *string `json:"credits"`
	}
	if !decode(w, r, &body) {
		return
	}
	var credits *store.CreditRequest
	if body.Credits != nil {
		d, ok := parseUSD(w, "credits", *body.Credits, false)
		if !ok {
			return
		}
		credits = &store.CreditRequest{Amount: d, Note: "opening credit"}
	}
	a, err := h.st.CreateAccount(r.Context(), body.Name, credits)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.writeAccount(w, r, http.StatusCreated, a)
}

func (h *Handler) writeAccount(w http.ResponseWriter, r *http.Request, status int, a store.Account) {
	out, err := h.account(r, a)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, status, out)
}

func (h *Handler) listAccounts(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageSize(w, r)
	if !ok {
		return
	}
	page, more, err := h.st.ListAccounts(r.Context(), store.AccountQuery{After: r.URL.Query().Get("cursor"), Limit: limit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := List[Account]{Data: make([]Account, 0, len(page)), HasMore: more}
	var slice store.Slicer // see yield
	for _, a := range page {
		slice.Yield()
		v, err := h.account(r, a)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out.Data = append(out.Data, v)
	}
	if more {
		out.NextCursor = &page[len(page)-1].Name
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) getAccount(w http.ResponseWriter, r *http.Request) {
	a, err := h.st.AccountByName(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.writeAccount(w, r, http.StatusOK, a)
}

// patch is a PATCH body: each field given is set, null removing it; a
// field left out is left as it is.
type patch map[string]json.RawMessage

// isNull reports whether the field was given as null.
func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// decodePatch reads a PATCH body of the fields allowed.
func decodePatch(w http.ResponseWriter, r *http.Request, allowed ...string) (patch, bool) {
	var p patch
	if !decode(w, r, &p) {
		return nil, false
	}
	for f := range p {
		known := false
		for _, a := range allowed {
			known = known || f == a
		}
		if !known {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf("unknown field %q: this route changes %v", f, allowed))
			return nil, false
		}
	}
	return p, true
}

// cap reads a cap field of p: (nil, true) for null.
func (p patch) cap(w http.ResponseWriter, field string) (*apd.Decimal, bool) {
	if isNull(p[field]) {
		return nil, true
	}
	var s string
	if err := json.Unmarshal(p[field], &s); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, field+" must be an amount in USD as a string, such as \"2.50\", or null")
		return nil, false
	}
	d, ok := parseUSD(w, field, s, true)
	return &d, ok
}

// rate reads a per-minute limit field of p: (nil, true) for null.
func (p patch) rate(w http.ResponseWriter, field string) (*int64, bool) {
	if isNull(p[field]) {
		return nil, true
	}
	var n int64
	if err := json.Unmarshal(p[field], &n); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, field+" must be a whole number (0: unlimited) or null (the server's default)")
		return nil, false
	}
	return &n, true
}

// time reads a time field of p: (nil, true) for null.
func (p patch) time(w http.ResponseWriter, field string) (*time.Time, bool) {
	if isNull(p[field]) {
		return nil, true
	}
	var s string
	if err := json.Unmarshal(p[field], &s); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, field+" must be an RFC 3339 time as a string, or null")
		return nil, false
	}
	return parseTime(w, field, s)
}

// accountFields are what PATCH /accounts/{name} changes.
var accountFields = []string{"daily_cap", "monthly_cap", "rpm", "tpm"}

// applyAccount sets the fields of p on c. A negative rpm or tpm is left to
// the store, which refuses it (422) as it refuses one from the CLI.
func (p patch) applyAccount(w http.ResponseWriter, c *store.Caps) bool {
	ok := true
	for _, f := range accountFields {
		if _, set := p[f]; !set || !ok {
			continue
		}
		switch f {
		case "daily_cap":
			c.Daily, ok = p.cap(w, f)
		case "monthly_cap":
			c.Monthly, ok = p.cap(w, f)
		case "rpm":
			c.RPM, ok = p.accountRate(w, f)
		case "tpm":
			c.TPM, ok = p.accountRate(w, f)
		}
	}
	return ok
}

// accountRate reads an account's per-minute limit field of p: (nil, true)
// for null.
func (p patch) accountRate(w http.ResponseWriter, field string) (*int64, bool) {
	if isNull(p[field]) {
		return nil, true
	}
	var n int64
	if err := json.Unmarshal(p[field], &n); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, field+" must be a whole number, or null (no limit of the account's)")
		return nil, false
	}
	return &n, true
}

func (h *Handler) patchAccount(w http.ResponseWriter, r *http.Request) {
	p, ok := decodePatch(w, r, accountFields...)
	if !ok {
		return
	}
	var want store.Caps // the fields given, parsed before anything is read
	if !p.applyAccount(w, &want) {
		return
	}
	a, err := h.st.AccountByName(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	a, err = h.st.UpdateAccountCaps(r.Context(), a.ID, func(c *store.Caps) {
		for _, f := range accountFields {
			if _, set := p[f]; !set {
				continue
			}
			switch f {
			case "daily_cap":
				c.Daily = want.Daily
			case "monthly_cap":
				c.Monthly = want.Monthly
			case "rpm":
				c.RPM = want.RPM
			case "tpm":
				c.TPM = want.TPM
			}
		}
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.writeAccount(w, r, http.StatusOK, a)
}

// Key is an API key as the API shows it: never its secret.
type Key struct {
	ID           string  `json:"id"`
	Account      string  `json:"account"`
	Name         string  `json:"name"`
	Status       string  `json:"status"` // active | revoked | expired
	CreatedAt    string  `json:"created_at"`
	RevokedAt    *string `json:"revoked_at"`
	ExpiresAt    *string `json:"expires_at"`    // null: never
	DailyLimit   *string `json:"daily_limit"`   // USD; null: none
	MonthlyLimit *string `json:"monthly_limit"` // USD; null: none
	RPM          *int64  `json:"rpm"`           // null: the server's default; 0: unlimited
	TPM          *int64  `json:"tpm"`
}

// NewKey is the body of a created key: the key, and its secret, shown
// this once.
type NewKey struct {
	Key
	Secret string `json:"key"`
}

func (h *Handler) key(k store.Key) Key {
	out := Key{ID: k.ID, Account: k.AccountName, Name: k.Name, Status: "active", CreatedAt: timeText(k.CreatedAt),
		DailyLimit: optUSD(k.Limits.DailyCap), MonthlyLimit: optUSD(k.Limits.MonthlyCap), RPM: k.Limits.RPM, TPM: k.Limits.TPM}
	if e := k.Limits.ExpiresAt; e != nil {
		s := timeText(*e)
		out.ExpiresAt = &s
		if !h.now().Before(*e) {
			out.Status = "expired"
		}
	}
	if !k.RevokedAt.IsZero() {
		s := timeText(k.RevokedAt)
		out.RevokedAt, out.Status = &s, "revoked"
	}
	return out
}

// keyFields are the limits a key is created with and PATCH changes.
var keyFields = []string{"daily_limit", "monthly_limit", "rpm", "tpm", "expires_at"}

// apply sets the fields of p on l.
func (p patch) apply(w http.ResponseWriter, l *store.KeyLimits) bool {
	ok := true
	for _, f := range keyFields {
		if _, set := p[f]; !set || !ok {
			continue
		}
		switch f {
		case "daily_limit":
			l.DailyCap, ok = p.cap(w, f)
		case "monthly_limit":
			l.MonthlyCap, ok = p.cap(w, f)
		case "rpm":
			l.RPM, ok = p.rate(w, f)
		case "tpm":
			l.TPM, ok = p.rate(w, f)
		case "expires_at":
			l.ExpiresAt, ok = p.time(w, f)
		}
	}
	return ok
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	p, ok := decodePatch(w, r, append([]string{"name"}, keyFields...)...)
	if !ok {
		return
	}
	var name string
	if v, set := p["name"]; set && !isNull(v) {
		if err := json.Unmarshal(v, &name); err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidRequest, "name must be a string")
			return
		}
	}
	var l store.KeyLimits
	if !p.apply(w, &l) {
		return
	}
	a, err := h.st.AccountByName(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	secret, k, err := h.st.IssueKey(r.Context(), a.ID, name, l)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, NewKey{Key: h.key(k), Secret: secret})
}

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) {
	a, err := h.st.AccountByName(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	keys, err := h.st.ListKeys(r.Context(), a.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := List[Key]{Data: make([]Key, 0, len(keys))}
	for _, k := range keys {
		out.Data = append(out.Data, h.key(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) patchKey(w http.ResponseWriter, r *http.Request) {
	p, ok := decodePatch(w, r, keyFields...)
	if !ok {
		return
	}
	var l store.KeyLimits
	if !p.apply(w, &l) {
		return
	}
	k, err := h.st.UpdateKeyLimits(r.Context(), r.PathValue("id"), func(cur *store.KeyLimits) {
		for _, f := range keyFields {
			if _, set := p[f]; !set {
				continue
			}
			switch f {
			case "daily_limit":
				cur.DailyCap = l.DailyCap
			case "monthly_limit":
				cur.MonthlyCap = l.MonthlyCap
			case "rpm":
				cur.RPM = l.RPM
			case "tpm":
				cur.TPM = l.TPM
			case "expires_at":
				cur.ExpiresAt = l.ExpiresAt
			}
		}
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.key(k))
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	k, err := h.st.RevokeKey(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.key(k))
}

// CreditTx is a credit transaction as the API shows it.
type CreditTx struct {
	ID           string  `json:"id"`
	Account      string  `json:"account"`
	Amount       string  `json:"amount"`
	Reference    string  `json:"reference"`
	Note         string  `json:"note"`
	Actor        string  `json:"actor"`
	BalanceAfter *string `json:"balance_after"` // null: made before svcgw recorded it
	CreatedAt    string  `json:"created_at"`
}

// Credited is the body of a credit: the transaction and the balance right
// after it.
type Credited struct {
	Transaction CreditTx `json:"transaction"`
	Balance     string   `json:"balance"`
}

func creditTx(t store.CreditTx) CreditTx {
	return CreditTx{ID: "ctx_" + strconv.FormatInt(t.ID, 10), Account: t.AccountName, Amount: usdText(t.Amount),
		Reference: t.Reference, Note: t.Note, Actor: t.Actor, BalanceAfter: optUSD(t.BalanceAfter), CreatedAt: timeText(t.CreatedAt)}
}

// idempotencyHeader makes a credit count once however often it is sent.
const idempotencyHeader = "Idempotency-Key"

func (h *Handler) credit(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Amount    string `json:"amount"`
		Reference string `json:"reference"`
		Note      string `json:"note"`
	}
	if !decode(w, r, &body) {
		return
	}
	amount, ok := parseUSD(w, "amount", body.Amount, true)
	if !ok {
		return
	}
	a, err := h.st.AccountByName(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.st.Credit(r.Context(), a.ID, store.CreditRequest{
		Amount: amount, Reference: body.Reference, Note: body.Note, IdempotencyKey: r.Header.Get(idempotencyHeader),
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// A replay answers what the first request was answered: the balance
	// right after its transaction.
	balance := usdText(res.Account.Balance)
	if res.Tx.BalanceAfter != nil {
		balance = usdText(*res.Tx.BalanceAfter)
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, Credited{Transaction: creditTx(res.Tx), Balance: balance})
}

func (h *Handler) listCredits(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageSize(w, r)
	if !ok {
		return
	}
	before, ok := idCursor(w, r, "ctx_")
	if !ok {
		return
	}
	a, err := h.st.AccountByName(r.Context(), r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	txs, more, err := h.st.ListCredits(r.Context(), a.ID, store.CreditQuery{Before: before, Limit: limit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := List[CreditTx]{Data: make([]CreditTx, 0, len(txs)), HasMore: more}
	for _, t := range txs {
		out.Data = append(out.Data, creditTx(t))
	}
	if more {
		out.NextCursor = &out.Data[len(out.Data)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// AuditEntry is an entry of the audit log as the API shows it.
type AuditEntry struct {
	ID        string          `json:"id"`
	CreatedAt string          `json:"created_at"`
	Actor     string          `json:"actor"`
	Action    string          `json:"action"`
	Target    string          `json:"target"`
	Before    json.RawMessage `json:"before"` // null: none (a creation)
	After     json.RawMessage `json:"after"`
}

func (h *Handler) audit(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageSize(w, r)
	if !ok {
		return
	}
	before, ok := idCursor(w, r, "aud_")
	if !ok {
		return
	}
	entries, more, err := h.st.ListAudit(r.Context(), store.AuditQuery{Before: before, Limit: limit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := List[AuditEntry]{Data: make([]AuditEntry, 0, len(entries)), HasMore: more}
	for _, e := range entries {
		v := AuditEntry{ID: "aud_" + strconv.FormatInt(e.ID, 10), CreatedAt: timeText(e.CreatedAt),
			Actor: e.Actor, Action: e.Action, Target: e.Target, Before: e.Before, After: e.After}
		if v.Before == nil {
			v.Before = json.RawMessage("null")
		}
		if v.After == nil {
			v.After = json.RawMessage("null")
		}
		out.Data = append(out.Data, v)
	}
	if more {
		out.NextCursor = &out.Data[len(out.Data)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// yield: the reads of a page of accounts, or of every account's usage,
// are one database read per account, milliseconds of processor in all.
// On a gateway with one core, a call that arrives meanwhile would wait for
// all of it: runtime.Gosched between accounts is not enough, since with
// one P the scheduler polls the network only when it has nothing to run
// (store.YieldCPU). A store.Slicer gives the processor up between
// accounts once a slice (store.ReadSlice, 100 µs) has run, network
// included, as the store's usage reads do between rows
// (docs/ledger-scale.md).

// pageSize reads ?limit= (1 to 500; 100 when absent).
func pageSize(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 500 {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "limit must be a whole number from 1 to 500")
		return 0, false
	}
	return n, true
}

// idCursor reads ?cursor=, a next_cursor of the list: prefix and a number.
func idCursor(w http.ResponseWriter, r *http.Request, prefix string) (int64, bool) {
	v := r.URL.Query().Get("cursor")
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v[min(len(prefix), len(v)):], 10, 64)
	if len(v) <= len(prefix) || v[:len(prefix)] != prefix || err != nil || n <= 0 {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "cursor must be a next_cursor of this list")
		return 0, false
	}
	return n, true
}

// usdPattern is an amount in USD as the API takes it: plain digits, at
// most six decimal places, a sign only where negative amounts are taken.
var usdPattern = regexp.MustCompile(`^-?[0-9]{1,15}(\.[0-9]{1,6})?$`)

// parseUSD parses an amount field; negative only if signed.
func parseUSD(w http.ResponseWriter, field, s string, signed bool) (apd.Decimal, bool) {
	if !usdPattern.MatchString(s) || (!signed && s[0] == '-') {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, fmt.Sprintf(
			"%s must be an amount in USD as a string of digits with at most six decimal places, such as \"5.00\"", field))
		return apd.Decimal{}, false
	}
	var d apd.Decimal
	if _, _, err := d.SetString(s); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, field+": "+err.Error())
		return apd.Decimal{}, false
	}
	return d, true
}

func parseTime(w http.ResponseWriter, field, s string) (*time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, field+" must be an RFC 3339 time, such as \"2026-12-31T23:59:59Z\"")
		return nil, false
	}
	return &t, true
}

func optUSD(d *apd.Decimal) *string {
	if d == nil {
		return nil
	}
	s := usdText(*d)
	return &s
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// usdText renders an amount with six decimal places, as every amount
// appears in the API.
func usdText(d apd.Decimal) string {
	m, err := money.FromDecimal(d)
	if err != nil {
		return d.Text('f')
	}
	return m.String()
}
