package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/surfaces/account"
)

type usageCmd struct {
	Account string `required:"" help:"Account name."`
	GroupBy string `name:"group-by" default:"day" enum:"day,request_type,application,api_key" help:"day, request_type, application or api_key."`
	Start   string `help:"Lower bound (inclusive): YYYY-MM-DD, or RFC 3339 at a UTC midnight."`
	End     string `help:"Upper bound: YYYY-MM-DD (inclusive), or RFC 3339 at a UTC midnight (exclusive)."`
	JSON    bool   `name:"json" help:"Print JSON (as GET /svc/v1/usage)."`
}

// Run reports usage with the same parsing and figures as GET /svc/v1/usage.
func (c *usageCmd) Run(e *env, st store.DB) error {
	q, err := account.ParseUsageQuery(c.GroupBy, c.Start, c.End)
	if err != nil {
		return c.flagError(err)
	}
	acct, err := e.account(st, c.Account)
	if err != nil {
		return err
	}
	buckets, err := st.Usage(e.ctx, acct.ID, q)
	if err != nil {
		return err
	}
	report, err := account.NewUsageReport(q, buckets)
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSONOut(e, report)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tREQUESTS\tINPUT\tOUTPUT\tTOTAL\tCACHED INPUT\tCOST (USD)\t\n", header(report.GroupBy))
	row := func(name string, t account.UsageTotals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", name, t.Requests, t.InputTokens, t.OutputTokens, t.TotalTokens, t.CachedInputTokens, t.Cost)
	}
	for _, b := range report.Data {
		row(b.Bucket, b.UsageTotals)
	}
	row("total", report.Total)
	return tw.Flush()
}

// flagError restates a refusal of the usage endpoint's parser (worded for
// its query parameters) in terms of this command's flags.
func (c *usageCmd) flagError(err error) error {
	const dates = "want a date (YYYY-MM-DD) or an RFC 3339 time (2026-11-01T09:00:00Z)"
	if _, e := account.ParseUsageQuery("", c.Start, ""); e != nil {
		return fmt.Errorf("--start %q: %s", c.Start, dates)
	}
	if _, e := account.ParseUsageQuery("", "", c.End); e != nil {
		return fmt.Errorf("--end %q: %s", c.End, dates)
	}
	if _, e := account.ParseUsageQuery(c.GroupBy, "", ""); e != nil {
		return fmt.Errorf("--group-by %q: want day, request_type, application or api_key", c.GroupBy)
	}
	if c.Start != "" && c.End != "" {
		return fmt.Errorf("--end %s is before --start %s", c.End, c.Start)
	}
	return err
}

func header(groupBy string) string {
	switch groupBy {
	case "request_type":
		return "REQUEST TYPE"
	case "api_key":
		return "API KEY"
	}
	return map[string]string{"day": "DAY", "application": "APPLICATION"}[groupBy]
}

type generationCmd struct {
	ID   string `arg:"" help:"The id from a response body (chatcmpl-…, resp_…, msg_…, or a generate-content responseId)."`
	JSON bool   `name:"json" help:"Print JSON (as GET /svc/v1/generation, without the data wrapper)."`
}

func (c *generationCmd) Run(e *env, st store.DB) error {
	g, err := st.GenerationByID(e.ctx, c.ID)
	if errors.Is(err, store.ErrNotFound) {
		// As GET /svc/v1/generation: say when retention deleted it.
		if at, ok := account.IssuedAt(c.ID); ok {
			if before, perr := st.PrunedBefore(e.ctx); perr == nil && !before.IsZero() && at.Before(before) {
				return fmt.Errorf("generation %q is older than the retention window: records created before %s have been deleted (their costs still count in usage and credits)",
					c.ID, before.UTC().Format(time.RFC3339))
			}
		}
	}
	if err != nil {
		return err
	}
	rec := account.NewGenerationRecord(g)
	if c.JSON {
		return writeJSONOut(e, rec)
	}
	acct, err := st.AccountByID(e.ctx, g.AccountID)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", rec.ID},
		{"account", acct.Name},
		{"api key", g.KeyID},
		{"application", rec.Application},
		{"model (as sent)", rec.Model},
		{"request type", rec.RequestType},
		{"created at", rec.CreatedAt},
		{"streamed", fmt.Sprint(rec.Streamed)},
		{"finish reason", finishText(rec.FinishReason)},
		{"prompt tokens", fmt.Sprint(rec.Usage.PromptTokens)},
		{"cached prompt tokens", fmt.Sprint(rec.Usage.CachedPromptTokens)},
		{"completion tokens", fmt.Sprint(rec.Usage.CompletionTokens)},
		{"reasoning tokens", fmt.Sprint(rec.Usage.ReasoningTokens)},
		{"total tokens", fmt.Sprint(rec.Usage.TotalTokens)},
		{"total cost (USD)", rec.TotalCost},
		{"latency ms", fmt.Sprint(rec.LatencyMS)},
		{"generation time ms", fmt.Sprint(rec.GenerationTimeMS)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// finishText is a record's finish reason as the table shows it: "-" for
// none (an embedding).
func finishText(f *string) string {
	if f == nil {
		return "-"
	}
	return *f
}
