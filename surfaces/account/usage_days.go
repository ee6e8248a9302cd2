package account

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/store"
)

// DayUsageBucket is one cell of a usage report grouped by day and one more
// axis: the UTC day, the axis' bucket (a request type, an application or a
// key id) and its figures.
type DayUsageBucket struct {
	Day    string `json:"day"`
	Bucket string `json:"bucket"`
	UsageTotals
}

// DayUsageReport is the body of GET /svc/v1/usage?group_by=day,AXIS: the
// shape of UsageReport, with cells that carry their day beside their bucket.
type DayUsageReport struct {
	Object    string           `json:"object"`
	GroupBy   string           `json:"group_by"`
	StartDate *string          `json:"start_date"`
	EndDate   *string          `json:"end_date"`
	Data      []DayUsageBucket `json:"data"`
	Total     UsageTotals      `json:"total"`
}

// dayAxis reports whether group_by asks for two axes, day and another
// ("day,request_type"), and returns the other.
func dayAxis(groupBy string) (axis string, ok bool) {
	return strings.CutPrefix(groupBy, store.GroupByDay+",")
}

// usageByDay serves GET /svc/v1/usage?group_by=day,AXIS, AXIS being
// request_type, application or api_key: one cell per UTC day and bucket
// with usage, ordered by day then bucket. It is what a chart of spend per
// day stacked by one axis needs, in one request. The dates are as for any
// grouping.
func (h *Handler) usageByDay(w http.ResponseWriter, r *http.Request, caller store.Key, axis string, q url.Values) {
	switch axis {
	case store.GroupByRequestType, store.GroupByApplication, store.GroupByAPIKey:
	default:
		h.writeErr(w, r, llm.InvalidParam("group_by",
			"group_by=day,X takes X one of request_type, application, api_key."))
		return
	}
	uq, err := ParseUsageQuery(axis, q.Get("start_date"), q.Get("end_date"))
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	ctx := r.Context()
	groupBy := store.GroupByDay + "," + axis
	var body []byte
	if h.usage.feed == nil { // no cache: the query and its report
		body, err = h.usageByDayReport(ctx, caller, groupBy, uq)
	} else {
		body, err = h.usage.get(ctx, keyOf(caller, groupBy, uq), func() (*usageView, error) {
			cells, err := h.st.UsageByDay(ctx, caller.AccountID, uq)
			if err != nil {
				return nil, err
			}
			return newUsageView(caller.AccountID, groupBy, true, uq, cells)
		})
	}
	if err != nil {
		h.internal(w, r, fmt.Errorf("usage: %w", err))
		return
	}
	writeBody(w, http.StatusOK, body)
}

// usageByDayReport is the body of the usage answer of uq grouped by day and
// uq.GroupBy, read from the store.
func (h *Handler) usageByDayReport(ctx context.Context, caller store.Key, groupBy string, uq store.UsageQuery) ([]byte, error) {
	cells, err := h.st.UsageByDay(ctx, caller.AccountID, uq)
	if err != nil {
		return nil, err
	}
	buckets := make([]store.Bucket, len(cells))
	for i, c := range cells {
		buckets[i] = c.Bucket
	}
	flat, err := NewUsageReport(uq, buckets) // the totals, added up exactly
	if err != nil {
		return nil, err
	}
	report := DayUsageReport{
		Object:    flat.Object,
		GroupBy:   groupBy,
		StartDate: flat.StartDate,
		EndDate:   flat.EndDate,
		Data:      make([]DayUsageBucket, len(cells)),
		Total:     flat.Total,
	}
	for i, c := range cells {
		report.Data[i] = DayUsageBucket{Day: c.Day, Bucket: c.Bucket.Bucket, UsageTotals: flat.Data[i].UsageTotals}
	}
	return encodeJSON(report)
}
