package account

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// UsageTotals are the figures of one usage bucket, or of a whole report.
// InputTokens include the cached and cache-write ones; OutputTokens the
// reasoning ones.
type UsageTotals struct {
	Requests          int64  `json:"requests"`
	InputTokens       int64  `json:"input_tokens"`
	OutputTokens      int64  `json:"output_tokens"`
	TotalTokens       int64  `json:"total_tokens"`
	CachedInputTokens int64  `json:"cached_input_tokens"`
	CacheWriteTokens  int64  `json:"cache_write_tokens"`
	ReasoningTokens   int64  `json:"reasoning_tokens"`
	Cost              string `json:"cost"`
}

// UsageBucket is one bucket of a usage report.
type UsageBucket struct {
	Bucket string `json:"bucket"`
	UsageTotals
}

// UsageReport is the body of GET /svc/v1/usage (and of svcgw usage --json). StartDate and EndDate are
// the bounds applied, in RFC 3339 UTC, or null when unbounded; EndDate is
// exclusive, so a date-only end_date of 2025-03-10 is echoed as
// 2025-03-11T00:00:00Z.
type UsageReport struct {
	Object    string        `json:"object"`
	GroupBy   string        `json:"group_by"`
	StartDate *string       `json:"start_date"`
	EndDate   *string       `json:"end_date"`
	Data      []UsageBucket `json:"data"`
	Total     UsageTotals   `json:"total"`
}

// Usage serves GET /svc/v1/usage?group_by=&start_date=&end_date=: the
// account's requests, tokens and cost, grouped by day (the default),
// request_type, application or api_key, or by day and one of the other
// three (group_by=day,request_type; see usageByDay).
//
// start_date and end_date are YYYY-MM-DD (midnight UTC) or an RFC 3339
// time at a UTC midnight. A date-only end_date includes that whole day; an
// RFC 3339 end_date is exclusive. start_date is inclusive. Usage is kept
// per UTC day (store.Usage), so a bound within a day is refused with a 400
// rather than answered inexactly.
func (h *Handler) Usage(w http.ResponseWriter, r *http.Request, caller store.Key) {
	r, end, ok := h.begin(w, r, caller)
	if !ok {
		return
	}
	defer end()
	q, err := usageParams(r.URL.RawQuery)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	if axis, ok := dayAxis(q.Get("group_by")); ok {
		h.usageByDay(w, r, caller, axis, q)
		return
	}
	uq, err := ParseUsageQuery(q.Get("group_by"), q.Get("start_date"), q.Get("end_date"))
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	ctx := r.Context()
	var body []byte
	if h.usage.feed == nil { // no cache: the query and its report
		body, err = h.usageReport(ctx, caller, uq)
	} else {
		body, err = h.usage.get(ctx, keyOf(caller, uq.GroupBy, uq), func() (*usageView, error) {
			buckets, err := h.st.Usage(ctx, caller.AccountID, uq)
			if err != nil {
				return nil, err
			}
			cells := make([]store.DayBucket, len(buckets))
			for i, b := range buckets {
				cells[i].Bucket = b
			}
			return newUsageView(caller.AccountID, uq.GroupBy, false, uq, cells)
		})
	}
	if err != nil {
		h.internal(w, r, fmt.Errorf("usage: %w", err))
		return
	}
	writeBody(w, http.StatusOK, body)
}

// usageReport is the body of the usage answer of uq, read from the store.
func (h *Handler) usageReport(ctx context.Context, caller store.Key, uq store.UsageQuery) ([]byte, error) {
	buckets, err := h.st.Usage(ctx, caller.AccountID, uq)
	if err != nil {
		// Everything the store would reject as invalid was checked before.
		return nil, err
	}
	report, err := NewUsageReport(uq, buckets)
	if err != nil {
		return nil, err
	}
	return encodeJSON(report)
}

// keyOf is the cache key of a usage answer (see usageCache): the caller's
// account (every key of an account sees the same usage) and the query as
// parsed, groupBy as the body echoes it.
func keyOf(caller store.Key, groupBy string, q store.UsageQuery) usageKey {
	return usageKey{account: caller.AccountID, groupBy: groupBy, start: q.Start.Unix(), end: q.End.Unix()}
}

// usageParams parses the query string strictly: net/url drops a pair it
// cannot parse (one with a semicolon, or a bad escape) without a word,
// which would turn group_by=;DROP… into the default grouping; and a
// parameter given twice would silently take its first value. Both are
// 400s naming the parameter.
func usageParams(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		param := ""
		for _, pair := range strings.Split(raw, "&") {
			k, _, _ := strings.Cut(pair, "=")
			if _, perr := url.ParseQuery(pair); perr != nil {
				param, _ = url.QueryUnescape(k)
				break
			}
		}
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Param: param, Err: err,
			Message: "The query string is malformed: separate parameters with & and percent-encode values (a ';' is not allowed)."}
	}
	for _, k := range []string{"group_by", "start_date", "end_date"} {
		if len(q[k]) > 1 {
			return nil, llm.InvalidParam(k, "%s is given more than once.", k)
		}
	}
	return q, nil
}

// ParseUsageQuery validates the usage parameters as the endpoint takes them:
// group_by defaults to day; start_date and end_date are YYYY-MM-DD (midnight
// UTC) or RFC 3339 at a UTC midnight, a date-only end_date including that
// whole day. Errors are invalid_request *llm.Error values naming the
// parameter.
func ParseUsageQuery(groupBy, startDate, endDate string) (store.UsageQuery, error) {
	switch groupBy {
	case "":
		groupBy = store.GroupByDay
	case store.GroupByDay, store.GroupByRequestType, store.GroupByApplication, store.GroupByAPIKey:
	default:
		return store.UsageQuery{}, llm.InvalidParam("group_by",
			"group_by must be one of day, request_type, application, api_key, or day and one of the last three (day,request_type).")
	}
	start, err := parseBound("start_date", startDate, false)
	if err != nil {
		return store.UsageQuery{}, err
	}
	end, err := parseBound("end_date", endDate, true)
	if err != nil {
		return store.UsageQuery{}, err
	}
	if !start.IsZero() && !end.IsZero() && start.After(end) {
		return store.UsageQuery{}, llm.InvalidParam("start_date", "start_date must not be after end_date.")
	}
	return store.UsageQuery{GroupBy: groupBy, Start: start, End: end}, nil
}

// NewUsageReport renders the buckets of q as the endpoint's body, with exact
// totals.
func NewUsageReport(q store.UsageQuery, buckets []store.Bucket) (UsageReport, error) {
	report := UsageReport{
		Object:    "usage",
		GroupBy:   q.GroupBy,
		StartDate: rfc3339(q.Start),
		EndDate:   rfc3339(q.End),
		Data:      make([]UsageBucket, 0, len(buckets)),
	}
	var total apd.Decimal
	for _, b := range buckets {
		report.Data = append(report.Data, UsageBucket{Bucket: b.Bucket, UsageTotals: totals(b)})
		report.Total.Requests += b.Requests
		report.Total.InputTokens += b.InputTokens
		report.Total.OutputTokens += b.OutputTokens
		report.Total.TotalTokens += b.TotalTokens
		report.Total.CachedInputTokens += b.CachedInputTokens
		report.Total.CacheWriteTokens += b.CacheWriteTokens
		report.Total.ReasoningTokens += b.ReasoningTokens
		// Addition without a precision limit is exact.
		if _, err := apd.BaseContext.Add(&total, &total, &b.Cost); err != nil {
			return UsageReport{}, fmt.Errorf("total cost: %w", err)
		}
	}
	report.Total.Cost = usd(total)
	return report, nil
}

func totals(b store.Bucket) UsageTotals {
	return UsageTotals{
		Requests:          b.Requests,
		InputTokens:       b.InputTokens,
		OutputTokens:      b.OutputTokens,
		TotalTokens:       b.TotalTokens,
		CachedInputTokens: b.CachedInputTokens,
		CacheWriteTokens:  b.CacheWriteTokens,
		ReasoningTokens:   b.ReasoningTokens,
		Cost:              usd(b.Cost),
	}
}

// dateLayout is the date-only form of start_date and end_date.
const dateLayout = "2006-01-02"

// parseBound parses a start_date or end_date value: empty is unbounded
// (the zero time), YYYY-MM-DD is midnight UTC, anything else must be
// RFC 3339 at a UTC midnight. A date-only end is inclusive, so it becomes
// the next midnight, the exclusive bound the store takes.
func parseBound(param, v string, end bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(dateLayout, v); err == nil {
		if end {
			t = t.AddDate(0, 0, 1)
		}
		return clampBound(t), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &llm.Error{
			Kind:    llm.KindInvalidRequest,
			Param:   param,
			Message: param + " must be a date (YYYY-MM-DD) or an RFC 3339 timestamp.",
			Err:     err,
		}
	}
	if !store.IsDayBound(t) {
		return time.Time{}, llm.InvalidParam(param,
			"%s must be a date (YYYY-MM-DD) or a time at a UTC midnight such as %sT00:00:00Z: usage is kept per UTC day, so a bound within a day cannot be answered exactly.",
			param, t.UTC().Format(dateLayout))
	}
	return clampBound(t.UTC()), nil
}

// The range of times RFC 3339 can write (four-digit years, in UTC).
var (
	firstBound = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	lastBound  = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// clampBound keeps a bound within what the report can echo as RFC 3339:
// the day after 9999-12-31 (a date-only end_date of 9999-12-31) or a zone
// offset past either end would otherwise be echoed as 10000-01-01T00:00:00Z
// or a negative year. The clamped bound selects the same generations.
func clampBound(t time.Time) time.Time {
	switch {
	case t.After(lastBound):
		return lastBound
	case t.Before(firstBound):
		return firstBound
	}
	return t
}

// rfc3339 renders a bound, or nil (JSON null) when unbounded.
func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}
