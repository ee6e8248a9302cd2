package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

type creditsCmd struct {
	Add  creditsAddCmd  `cmd:"" help:"Add prepaid credits (USD) to an account."`
	Show creditsShowCmd `cmd:"" help:"Show an account's balance, spend and caps."`
	Cap  creditsCapCmd  `cmd:"" help:"Set or clear an account's daily and monthly spend caps."`
}

type creditsAddCmd struct {
	Account string `required:"" help:"Account name."`
	Amount  string `arg:"" help:"Positive amount in USD, e.g. 25 or 12.50 (at most six decimal places)."`
}

func (c *creditsAddCmd) Run(e *env, st store.DB) error {
	amount, err := billing.ParseAmount(c.Amount)
	if err != nil {
		return err
	}
	acct, err := e.account(st, c.Account)
	if err != nil {
		return err
	}
	var credits apd.Decimal
	if _, err := apd.BaseContext.Add(&credits, &acct.Balance, &acct.TotalUsed); err != nil {
		return err
	}
	if err := billing.CheckCredits(credits, amount); err != nil {
		return err
	}
	acct, err = st.AddCredits(e.ctx, acct.ID, amount, "cli")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "added %s USD to %q\n", billing.Format(amount), acct.Name)
	return printAccount(e, st, acct, false)
}

type creditsShowCmd struct {
	Account string `required:"" help:"Account name."`
	JSON    bool   `name:"json" help:"Print JSON: GET /svc/v1/credits's fields, plus caps and spend in the current UTC day and month."`
}

func (c *creditsShowCmd) Run(e *env, st store.DB) error {
	acct, err := e.account(st, c.Account)
	if err != nil {
		return err
	}
	return printAccount(e, st, acct, c.JSON)
}

// printAccount shows the account with its spend in the current UTC day and
// month, as committed (a running server may hold a few milliseconds more).
func printAccount(e *env, st store.DB, acct store.Account, asJSON bool) error {
	sp, err := st.PeriodSpend(e.ctx, acct.ID, "", time.Now())
	if err != nil {
		return err
	}
	today, month := money.Micros(sp.AccountDay).String(), money.Micros(sp.AccountMonth).String()
	if asJSON {
		// The field names are GET /svc/v1/credits's.
		return writeJSONOut(e, struct {
			Balance        string  `json:"balance"`
			TotalUsed      string  `json:"total_used"`
			SpendToday     string  `json:"spend_today"`
			SpendThisMonth string  `json:"spend_this_month"`
			DailyCap       *string `json:"daily_cap"`
			MonthlyCap     *string `json:"monthly_cap"`
		}{billing.Format(acct.Balance), billing.Format(acct.TotalUsed), today, month, capJSON(acct.DailyCap), capJSON(acct.MonthlyCap)})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tBALANCE\tTOTAL USED\tTODAY (UTC)\tDAILY CAP\tTHIS MONTH\tMONTHLY CAP")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", acct.Name, billing.Format(acct.Balance), billing.Format(acct.TotalUsed),
		today, capText(acct.DailyCap), month, capText(acct.MonthlyCap))
	return tw.Flush()
}

type creditsCapCmd struct {
	Account string `required:"" help:"Account name."`
	Daily   string `placeholder:"USD|none" help:"Cap on the account's spend per UTC day (0 allows none), or none."`
	Monthly string `placeholder:"USD|none" help:"Cap on the account's spend per UTC month (0 allows none), or none."`
}

// Run changes only the caps given. A running server sees a raised cap at
// the next call it would otherwise refuse, and any change within a second.
func (c *creditsCapCmd) Run(e *env, st store.DB) error {
	if c.Daily == "" && c.Monthly == "" {
		return fmt.Errorf("nothing to change: give --daily, --monthly or both (an amount in USD, or none)")
	}
	var daily, monthly *apd.Decimal
	var err error
	if c.Daily != "" {
		if daily, err = parseCap("daily", c.Daily); err != nil {
			return err
		}
	}
	if c.Monthly != "" {
		if monthly, err = parseCap("monthly", c.Monthly); err != nil {
			return err
		}
	}
	acct, err := e.account(st, c.Account)
	if err != nil {
		return err
	}
	acct, err = st.UpdateAccountCaps(e.ctx, acct.ID, func(caps *store.Caps) {
		if c.Daily != "" {
			caps.Daily = daily
		}
		if c.Monthly != "" {
			caps.Monthly = monthly
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "account %q: daily cap %s, monthly cap %s\n", acct.Name, capText(acct.DailyCap), capText(acct.MonthlyCap))
	return printAccount(e, st, acct, false)
}
