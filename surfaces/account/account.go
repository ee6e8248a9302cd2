// Package account serves the account endpoints of the contract
// (docs/contract.md#account-endpoints): GET /svc/v1/credits, GET /svc/v1/usage,
// GET /svc/v1/generation and POST /svc/v1/feedback. Every answer is scoped
// to the calling key's account; the account is a parameter of every store
// query, never a filter applied afterwards.
//
// The server authenticates the caller and passes the resolved store.Key;
// this package decodes query strings and bodies, calls the store, and
// encodes JSON. Money is rendered as strings with six decimal places.
//
// The generation lookup wraps its record in {"data": {...}}, the OpenRouter
// convention for the same endpoint, so that clients written for it work.
//
// Every failure is an *llm.Error (invalid_request 400, not_found 404,
// conflict 409, too_large 413, internal 500, unavailable 503) handed to the
// writeErr function the server supplies, which renders the envelope.
//
// account imports store and llm only: never server, cli or another surface.
package account

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

// FeedbackMaxAge is how old a response may be and still take feedback
// (docs/contract.md#account-endpoints).
const FeedbackMaxAge = 30 * 24 * time.Hour

// maxFeedbackBody bounds the feedback body this package reads; the server
// applies its own, larger, limit to every request.
const maxFeedbackBody = 64 << 10

// Handler serves the account endpoints. Create it with New.
type Handler struct {
	st store.DB
	// now is the request clock. The only time-relative rule today, the
	// feedback window, is checked by the store against its own clock, which
	// the server gives the same source.
	now      func() time.Time
	writeErr func(w http.ResponseWriter, r *http.Request, err error)
	limits   Limits
	inflight inflight
	turns    chan struct{} // one token per account request being served
	waiting  atomic.Int32  // requests waiting for a turn
	budget   keyBudget     // each key's budget of account-request time
	gate     *syncGate     // the requests' shared waits for the ledger's commits
	usage    usageCache    // usage answers, kept up to date with the ledger's commits
}

// New returns a Handler reading st. writeErr renders every failure; it is
// always given an *llm.Error. A nil now means time.Now; zero limits take
// their defaults.
func New(st store.DB, now func() time.Time, writeErr func(w http.ResponseWriter, r *http.Request, err error), limits Limits) *Handler {
	if now == nil {
		now = time.Now
	}
	limits = limits.withDefaults()
	h := &Handler{st: st, now: now, writeErr: writeErr, limits: limits, turns: make(chan struct{}, limits.Concurrent),
		budget: keyBudget{rate: limits.Time.Seconds(), burst: limits.Burst.Seconds()},
		gate:   &syncGate{st: st, every: limits.SyncEvery, settle: limits.Settle, limit: 2 * limits.Timeout}}
	h.usage.follow(st)
	return h
}

// Credits serves GET /svc/v1/credits: the account's balance and total
// spend, what it has spent in the current UTC day and month against its
// caps, and the same for the calling key (whose caps apply on top of the
// account's). A cap is null when none is set.
func (h *Handler) Credits(w http.ResponseWriter, r *http.Request, caller store.Key) {
	r, end, ok := h.begin(w, r, caller)
	if !ok {
		return
	}
	defer end()
	ctx := r.Context()
	a, err := h.st.AccountByID(ctx, caller.AccountID)
	if err != nil {
		h.internal(w, r, fmt.Errorf("credits: %w", err))
		return
	}
	sp, err := h.st.Spend(ctx, caller.AccountID, caller.ID, h.now())
	if err != nil {
		h.internal(w, r, fmt.Errorf("credits: %w", err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, Credits{
		Balance:        usd(a.Balance),
		TotalUsed:      usd(a.TotalUsed),
		SpendToday:     money.Micros(sp.AccountDay).String(),
		SpendThisMonth: money.Micros(sp.AccountMonth).String(),
		DailyCap:       optUSD(a.DailyCap),
		MonthlyCap:     optUSD(a.MonthlyCap),
		Key: CreditsKey{
			ID:             caller.ID,
			Name:           caller.Name,
			SpendToday:     money.Micros(sp.KeyDay).String(),
			SpendThisMonth: money.Micros(sp.KeyMonth).String(),
			DailyCap:       optUSD(caller.Limits.DailyCap),
			MonthlyCap:     optUSD(caller.Limits.MonthlyCap),
		},
	})
}

// Credits is the body of GET /svc/v1/credits. Days and months are UTC, as
// the caps are.
type Credits struct {
	Balance        string     `json:"balance"`
	TotalUsed      string     `json:"total_used"`
	SpendToday     string     `json:"spend_today"`
	SpendThisMonth string     `json:"spend_this_month"`
	DailyCap       *string    `json:"daily_cap"`
	MonthlyCap     *string    `json:"monthly_cap"`
	Key            CreditsKey `json:"key"`
}

// CreditsKey is the calling key's part of the credits body.
type CreditsKey struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	SpendToday     string  `json:"spend_today"`
	SpendThisMonth string  `json:"spend_this_month"`
	DailyCap       *string `json:"daily_cap"`
	MonthlyCap     *string `json:"monthly_cap"`
}

// optUSD renders an optional amount, nil (JSON null) when absent.
func optUSD(d *apd.Decimal) *string {
	if d == nil {
		return nil
	}
	s := usd(*d)
	return &s
}

// Generation serves GET /svc/v1/generation?id=: the cost and usage record of
// one of the account's calls, by the id its response carried.
func (h *Handler) Generation(w http.ResponseWriter, r *http.Request, caller store.Key) {
	r, end, ok := h.begin(w, r, caller)
	if !ok {
		return
	}
	defer end()
	id := r.URL.Query().Get("id")
	if id == "" {
		h.writeErr(w, r, llm.InvalidParam("id", "The id query parameter is required."))
		return
	}
	ctx := r.Context()
	g, err := h.st.Generation(ctx, caller.AccountID, id)
	if errors.Is(err, store.ErrNotFound) {
		h.writeNotFound(w, r, id, err, false)
		return
	}
	if err != nil {
		h.internal(w, r, fmt.Errorf("generation: %w", err))
		return
	}

	h.writeJSON(w, r, http.StatusOK, struct {
		Data GenerationRecord `json:"data"`
	}{NewGenerationRecord(g)})
}

// GenerationUsage is the token usage of a generation record.
type GenerationUsage struct {
	PromptTokens       int `json:"prompt_tokens"`
	CompletionTokens   int `json:"completion_tokens"`
	TotalTokens        int `json:"total_tokens"`
	CachedPromptTokens int `json:"cached_prompt_tokens"`
	ReasoningTokens    int `json:"reasoning_tokens"`
}

// GenerationRecord is the contract's generation record (docs/contract.md#account-endpoints), as GET
// /svc/v1/generation returns it inside "data" (and svcgw generation --json).
type GenerationRecord struct {
	ID          string `json:"id"`
	RequestType string `json:"request_type"`
	CreatedAt   string `json:"created_at"`
	Streamed    bool   `json:"streamed"`
	// FinishReason is null for a call that has none: an embedding.
	FinishReason     *string         `json:"finish_reason"`
	TotalCost        string          `json:"total_cost"`
	Usage            GenerationUsage `json:"usage"`
	LatencyMS        int64           `json:"latency_ms"`
	GenerationTimeMS int64           `json:"generation_time_ms"`
	Application      string          `json:"application"`
	Model            string          `json:"model"` // the caller's model id, never a backend
}

// NewGenerationRecord renders a stored generation.
func NewGenerationRecord(g store.Generation) GenerationRecord {
	return GenerationRecord{
		ID:           g.ID,
		RequestType:  g.RequestType,
		CreatedAt:    g.CreatedAt.UTC().Format(time.RFC3339Nano),
		Streamed:     g.Streamed,
		FinishReason: finishReason(g.FinishReason),
		TotalCost:    g.Cost.String(),
		Usage: GenerationUsage{
			PromptTokens:       g.PromptTokens,
			CompletionTokens:   g.CompletionTokens,
			TotalTokens:        g.PromptTokens + g.CompletionTokens,
			CachedPromptTokens: g.CachedPromptTokens,
			ReasoningTokens:    g.ReasoningTokens,
		},
		LatencyMS:        g.LatencyMS,
		GenerationTimeMS: g.GenerationTimeMS,
		Application:      g.Application,
		Model:            g.Model,
	}
}

// finishReason is a stored finish reason as the record has it: null when
// there is none.
func finishReason(f string) *string {
	if f == "" {
		return nil
	}
	return &f
}

// notFound is the 404 of the generation and feedback endpoints. It does not
// say whether the id is unknown or another account's.
func notFound(cause error) *llm.Error {
	return &llm.Error{
		Kind:    llm.KindNotFound,
		Message: "No generation with this id was found for this account.",
		Param:   "id",
		Err:     cause,
	}
}

// issuedIDPrefixes are the prefixes of the ids the gateway issues, as each
// surface's NewID makes them (the server's tests check that they agree).
var issuedIDPrefixes = []string{"chatcmpl-", "resp_", "msg_", "gw"}

// IssuedAt returns when the gateway issued id, read from the id itself
// (llm.NewID puts the time first); ok is false for an id it did not issue.
func IssuedAt(id string) (time.Time, bool) {
	for _, p := range issuedIDPrefixes {
		if t, ok := llm.IDTime(id, p); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// pruned reports whether id, not found, names a generation issued before
// retention deleted detail, and the time before which it did. Ids carry
// their time, so no tombstone is needed. An id of another account, or one
// never issued, gets the same answer as one of the caller's: nothing about
// other accounts is revealed.
func (h *Handler) pruned(ctx context.Context, id string) (before time.Time, ok bool) {
	at, ok := IssuedAt(id)
	if !ok {
		return time.Time{}, false
	}
	before, err := h.st.PrunedBefore(ctx)
	if err != nil || before.IsZero() || !at.Before(before) {
		return time.Time{}, false
	}
	return before, true
}

// writeNotFound answers a lookup (or, with feedback set, a rating) of an
// id that was not found: a 404 that says the generation is older than the
// retention window when it is, else the plain 404. Feedback on a pruned
// generation too old to be rated anyway gets the 409 it got before it was
// pruned.
func (h *Handler) writeNotFound(w http.ResponseWriter, r *http.Request, id string, cause error, feedback bool) {
	before, ok := h.pruned(r.Context(), id)
	if !ok {
		h.writeErr(w, r, notFound(cause))
		return
	}
	if at, _ := IssuedAt(id); feedback && h.now().Sub(at) > FeedbackMaxAge {
		h.writeErr(w, r, &llm.Error{Kind: llm.KindConflict, Param: "id", Message: feedbackTooOld, Err: cause})
		return
	}
	h.writeErr(w, r, &llm.Error{
		Kind: llm.KindNotFound,
		Message: "This generation is older than the retention window: the detail of generations created before " +
			before.UTC().Format(time.RFC3339) + " has been deleted. Its cost still counts in usage and credits.",
		Param: "id",
		Err:   cause,
	})
}

// feedbackTooOld is the message of the 409 for feedback past FeedbackMaxAge.
const feedbackTooOld = "Feedback is accepted only for responses at most 30 days old."

// internal reports a failure the caller cannot fix, keeping err for logs:
// a 504 saying so when the request ran out of its time (Limits.Timeout); a
// 503 with Retry-After when the database cannot answer now (the ledger
// cannot record, or a read timed out), so the caller retries; else a 500.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	if timedOut(r) {
		h.writeErr(w, r, &llm.Error{
			Kind: llm.KindTimeout,
			Message: fmt.Sprintf("This request did not finish within %s and was stopped; retry later, or ask for a shorter date range.",
				h.limits.Timeout),
			Err: err,
		})
		return
	}
	if errors.Is(err, store.ErrUnavailable) {
		h.writeErr(w, r, &llm.Error{Kind: llm.KindUnavailable, RetryAfter: unavailableRetryAfter, Err: err,
			Message: "Account data cannot be read at the moment: the gateway's database is unavailable. Retry later."})
		return
	}
	h.writeErr(w, r, &llm.Error{Kind: llm.KindInternal, Message: "Internal error.", Err: err})
}

// unavailableRetryAfter is the Retry-After of a 503, as the server's own.
const unavailableRetryAfter = 5 * time.Second

// writeJSON encodes v as the response body with the given status.
func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeBody(w, status, b)
}

// encodeJSON is the body of an answer: v in JSON and a newline.
func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return append(b, '\n'), nil
}

// writeBody writes an encoded JSON answer (encodeJSON) with the given status.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store") // balances and usage change by the second
	w.WriteHeader(status)
	w.Write(body)
}

// usdContext quantizes money; its precision covers any int64 of micros.
var usdContext = apd.BaseContext.WithPrecision(34)

// usd renders d in USD with exactly six decimal places. The store's values
// already have that scale; quantizing makes the rendering independent of it.
func usd(d apd.Decimal) string {
	var q apd.Decimal
	if _, err := usdContext.Quantize(&q, &d, -6); err != nil {
		return d.Text('f')
	}
	return q.Text('f')
}
