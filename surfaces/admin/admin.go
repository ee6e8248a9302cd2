// Package admin serves the management API under /admin/v1/ on the admin
// listener (svcgw serve --admin-addr): what a billing system, a signup page
// or an operator's script calls to create accounts and keys, change their
// caps and limits, add credits idempotently, and read usage, generations
// and the audit log of every change (docs/admin-api.md;
// GET /admin/v1/openapi.json describes it all).
//
// Every request carries an admin token (Authorization: Bearer …), checked
// by Guard, which the server puts in front of the whole admin listener. A
// read-only token may read everything and change nothing (403). Changes go
// through the same store calls as the CLI's, with the token's name as the
// actor of their audit entries (store.WithActor): one rule, two doors.
//
// Errors are {"error": {"code", "message"}} with a stable code (see
// errorCodes) and the status that goes with it.
//
// admin imports store, money, llm and surfaces/account (whose usage and
// generation shapes it reuses): never server or cli.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/svcgw/svcgw/store"
)

// Store is what the management API needs of the database.
type Store interface {
	TokenStore
	CreateAccount(ctx context.Context, name string, credits *store.CreditRequest) (store.Account, error)
	AccountByName(ctx context.Context, name string) (store.Account, error)
	ListAccounts(ctx context.Context, q store.AccountQuery) ([]store.Account, bool, error)
	UpdateAccountCaps(ctx context.Context, accountID int64, update func(*store.Caps)) (store.Account, error)
	PeriodSpend(ctx context.Context, accountID int64, keyID string, now time.Time) (store.Spend, error)
	Credit(ctx context.Context, accountID int64, req store.CreditRequest) (store.CreditResult, error)
	ListCredits(ctx context.Context, accountID int64, q store.CreditQuery) ([]store.CreditTx, bool, error)

	IssueKey(ctx context.Context, accountID int64, name string, l store.KeyLimits) (secret string, k store.Key, err error)
	ListKeys(ctx context.Context, accountID int64) ([]store.Key, error)
	UpdateKeyLimits(ctx context.Context, keyID string, update func(*store.KeyLimits)) (store.Key, error)
	RevokeKey(ctx context.Context, keyID string) (store.Key, error)

	ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, bool, error)

	Usage(ctx context.Context, accountID int64, q store.UsageQuery) ([]store.Bucket, error)
	UsageTotal(ctx context.Context, accountID int64, q store.UsageQuery) (store.Bucket, error)
	GenerationByID(ctx context.Context, id string) (store.Generation, error)
	ListGenerations(ctx context.Context, accountID int64, q store.ListQuery) ([]store.ListedGeneration, bool, error)
}

// Prefix is where the management API is mounted.
const Prefix = "/admin/v1/"

// Handler serves the management API. Create it with New.
type Handler struct {
	st  Store
	now func() time.Time
	log *slog.Logger
	mux *http.ServeMux
}

// New returns the management API over st. A nil now means time.Now; a nil
// log discards.
func New(st Store, now func() time.Time, log *slog.Logger) *Handler {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{st: st, now: now, log: log, mux: http.NewServeMux()}
	for _, rt := range h.Routes() {
		h.mux.Handle(rt.Pattern, rt.handler)
	}
	h.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return h
}

// Route is one route of the management API.
type Route struct {
	Pattern string // the ServeMux pattern
	Serves  string // what it serves, in docs/admin-api.md's words
	handler http.HandlerFunc
}

// Routes lists every route of the management API, in the order
// docs/admin-api.md lists them.
func (h *Handler) Routes() []Route {
	return []Route{
		{"POST /admin/v1/accounts", "create an account, with an opening credit", h.createAccount},
		{"GET /admin/v1/accounts", "list accounts (paged) with balance, spend and caps", h.listAccounts},
		{"GET /admin/v1/accounts/{name}", "one account", h.getAccount},
		{"PATCH /admin/v1/accounts/{name}", "change an account's caps (null removes)", h.patchAccount},
		{"POST /admin/v1/accounts/{name}/keys", "create a key; its secret is shown once", h.createKey},
		{"GET /admin/v1/accounts/{name}/keys", "an account's keys, never a secret", h.listKeys},
		{"PATCH /admin/v1/keys/{id}", "change a key's limits and expiry (null removes)", h.patchKey},
		{"DELETE /admin/v1/keys/{id}", "revoke a key", h.revokeKey},
		{"POST /admin/v1/accounts/{name}/credits", "add (or, negative, take back) credits; Idempotency-Key", h.credit},
		{"GET /admin/v1/accounts/{name}/credits", "an account's credit transactions (paged)", h.listCredits},
		{"GET /admin/v1/usage", "usage across accounts, as /svc/v1/usage", h.usage},
		{"GET /admin/v1/generations", "an account's generations, as /svc/v1/generations", h.generations},
		{"GET /admin/v1/generation", "any generation by id, as /svc/v1/generation", h.generation},
		{"GET /admin/v1/audit", "the audit log of every change (paged)", h.audit},
		{"GET /admin/v1/openapi.json", "this API as an OpenAPI 3.1 document", serveOpenAPI},
	}
}

// ServeHTTP serves the request with its admin token's name as the actor
// of the changes it makes (Guard has checked the token).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if t, ok := TokenFrom(r.Context()); ok {
		r = r.WithContext(store.WithActor(r.Context(), t.Name))
	}
	h.mux.ServeHTTP(w, r)
}

// The stable error codes, each with its status.
const (
	codeInvalidRequest      = "invalid_request"      // 400: malformed JSON, a bad parameter
	codeUnauthorized        = "unauthorized"         // 401: no admin token, or not a valid one
	codeForbidden           = "forbidden"            // 403: a read-only token asked for a change
	codeNotFound            = "not_found"            // 404
	codeConflict            = "conflict"             // 409: the name is taken
	codeIdempotencyMismatch = "idempotency_mismatch" // 409: an Idempotency-Key reused for another request
	codeInvalidValue        = "invalid_value"        // 422: a value the rules refuse
	codeInsufficientBalance = "insufficient_balance" // 422: a negative credit past the balance
	codeInternal            = "internal"             // 500
	codeUnavailable         = "unavailable"          // 503: the database cannot answer now
)

// ErrorBody is the body of every error.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error's code and message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{ErrorDetail{Code: code, Message: msg}})
}

// fail answers a store error: its kind picks the status and code; the
// message of a refusal is the store's (built of the request's own values
// and the rule), an internal error's says nothing and is logged.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, err.Error())
	case errors.Is(err, store.ErrIdempotencyMismatch):
		writeError(w, http.StatusConflict, codeIdempotencyMismatch,
			"this Idempotency-Key was used for a different request; use a new key for a new request")
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, codeConflict, err.Error())
	case errors.Is(err, store.ErrNegativeBalance):
		writeError(w, http.StatusUnprocessableEntity, codeInsufficientBalance, err.Error())
	case errors.Is(err, store.ErrInvalid):
		writeError(w, http.StatusUnprocessableEntity, codeInvalidValue, err.Error())
	case errors.Is(err, store.ErrUnavailable):
		h.log.Warn("admin api: database unavailable", "route", r.Pattern, "err", err)
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the database cannot answer now; retry later")
	default:
		h.log.Error("admin api", "route", r.Pattern, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "internal error")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// maxBody bounds a request body.
const maxBody = 64 << 10

// decode reads r's JSON body into v, refusing unknown fields and trailing
// data; it answers 400 itself and reports false on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "the body is not the JSON object this route takes: "+strings.TrimPrefix(err.Error(), "json: "))
		return false
	}
	return true
}
