package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/account"
)

// groupByAccount is the grouping of GET /admin/v1/usage that the key
// holder's /svc/v1/usage has no use for: one bucket per account name.
const groupByAccount = "account"

// usage serves GET /admin/v1/usage?group_by=&account=&start_date=&end_date=:
// the buckets and rules of /svc/v1/usage (account.ParseUsageQuery,
// account.NewUsageReport), for one account or summed over all of them,
// plus group_by=account.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	groupBy := q.Get("group_by")
	byAccount := groupBy == groupByAccount
	if byAccount {
		// Each account's usage is one bucket (UsageTotal); the grouping
		// only has to parse.
		groupBy = store.GroupByRequestType
	}
	uq, err := account.ParseUsageQuery(groupBy, q.Get("start_date"), q.Get("end_date"))
	if err != nil {
		writeLLMError(w, err, "group_by must be one of account, day, request_type, application, api_key")
		return
	}
	ctx := r.Context()
	var accts []store.Account
	if name := q.Get("account"); name != "" {
		a, err := h.st.AccountByName(ctx, name)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		accts = []store.Account{a}
	} else if accts, err = h.allAccounts(ctx); err != nil {
		h.fail(w, r, err)
		return
	}
	sums := make(map[string]*store.Bucket)
	var slice store.Slicer // see yield
	for _, a := range accts {
		slice.Yield()
		if byAccount {
			// One row an account, added up by the database.
			b, err := h.st.UsageTotal(ctx, a.ID, uq)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			if b.Requests > 0 { // an account without calls has no bucket
				b.Bucket = a.Name
				sums[a.Name] = &b
			}
			continue
		}
		buckets, err := h.st.Usage(ctx, a.ID, uq)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, b := range buckets {
			if err := addBucket(sums, b.Bucket, b); err != nil {
				h.fail(w, r, err)
				return
			}
		}
	}
	merged := make([]store.Bucket, 0, len(sums))
	for _, b := range sums {
		merged = append(merged, *b)
	}
	sort.Slice(merged, func(i, j int) bool { return merged[i].Bucket < merged[j].Bucket })
	if byAccount {
		uq.GroupBy = groupByAccount
	}
	report, err := account.NewUsageReport(uq, merged)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// addBucket adds b into sums[name].
func addBucket(sums map[string]*store.Bucket, name string, b store.Bucket) error {
	s := sums[name]
	if s == nil {
		b.Bucket = name
		sums[name] = &b
		return nil
	}
	s.Requests += b.Requests
	s.InputTokens += b.InputTokens
	s.OutputTokens += b.OutputTokens
	s.TotalTokens += b.TotalTokens
	s.CachedInputTokens += b.CachedInputTokens
	s.CacheWriteTokens += b.CacheWriteTokens
	s.ReasoningTokens += b.ReasoningTokens
	// Addition without a precision limit is exact.
	var sum apd.Decimal
	if _, err := apd.BaseContext.Add(&sum, &s.Cost, &b.Cost); err != nil {
		return fmt.Errorf("usage: add cost: %w", err)
	}
	s.Cost = sum
	return nil
}

// allAccounts reads every account, a page at a time.
func (h *Handler) allAccounts(ctx context.Context) ([]store.Account, error) {
	var out []store.Account
	q := store.AccountQuery{Limit: 500}
	for {
		page, more, err := h.st.ListAccounts(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if !more {
			return out, nil
		}
		q.After = page[len(page)-1].Name
	}
}

// generations serves GET /admin/v1/generations?account=&limit=&before=&request_type=&application=:
// the account's generations in the body of /svc/v1/generations.
func (h *Handler) generations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("account")
	if name == "" {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "the account query parameter is required")
		return
	}
	lq, err := account.ParseListQuery(q)
	if err != nil {
		writeLLMError(w, err, "")
		return
	}
	a, err := h.st.AccountByName(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page, more, err := h.st.ListGenerations(r.Context(), a.ID, lq)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusBadRequest, codeInvalidRequest,
			"before must be the id of one of this account's generations: the last_id of the previous page")
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, account.NewGenerationList(page, more))
}

// generation serves GET /admin/v1/generation?id=: any account's
// generation, in the body of /svc/v1/generation.
func (h *Handler) generation(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "the id query parameter is required")
		return
	}
	g, err := h.st.GenerationByID(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Data account.GenerationRecord `json:"data"`
	}{account.NewGenerationRecord(g)})
}

// writeLLMError answers a parameter error of the account endpoints'
// parsers as a 400 of this API; groupBy, when given, replaces the message
// of a bad group_by (this API takes one grouping more).
func writeLLMError(w http.ResponseWriter, err error, groupBy string) {
	message := "bad query parameters"
	var le *llm.Error
	if errors.As(err, &le) {
		message = le.Message
		if le.Param == "group_by" && groupBy != "" {
			message = groupBy
		}
	}
	writeError(w, http.StatusBadRequest, codeInvalidRequest, message)
}
