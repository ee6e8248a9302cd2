package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/store"
)

type creditsCmd struct {
	Add  creditsAddCmd  `cmd:"" help:"Add prepaid credits (USD) to an account."`
	Show creditsShowCmd `cmd:"" help:"Show an account's balance and spend."`
}

type creditsAddCmd struct {
	Account string `required:"" help:"Account name."`
	Amount  string `arg:"" help:"Positive amount in USD, e.g. 25 or 12.50 (at most six decimal places)."`
}

func (c *creditsAddCmd) Run(e *env) error {
	amount, err := billing.ParseAmount(c.Amount)
	if err != nil {
		return err
	}
	st, err := e.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	acct, err := st.AccountByName(e.ctx, c.Account)
	if err != nil {
		return fmt.Errorf("account %q: %w", c.Account, err)
	}
	acct, err = st.AddCredits(e.ctx, acct.ID, amount, "cli")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "added %s USD to %q\n", billing.Format(amount), acct.Name)
	return printAccount(e, acct, false)
}

type creditsShowCmd struct {
	Account string `required:"" help:"Account name."`
	JSON    bool   `name:"json" help:"Print JSON (as GET /svc/v1/credits)."`
}

func (c *creditsShowCmd) Run(e *env) error {
	st, err := e.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	acct, err := st.AccountByName(e.ctx, c.Account)
	if err != nil {
		return fmt.Errorf("account %q: %w", c.Account, err)
	}
	return printAccount(e, acct, c.JSON)
}

func printAccount(e *env, acct store.Account, asJSON bool) error {
	if asJSON {
		return writeJSONOut(e, map[string]string{
			"balance":    billing.Format(acct.Balance),
			"total_used": billing.Format(acct.TotalUsed),
		})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tBALANCE\tTOTAL USED\tDAILY CAP\tMONTHLY CAP")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", acct.Name, billing.Format(acct.Balance), billing.Format(acct.TotalUsed), capText(acct.DailyCap), capText(acct.MonthlyCap))
	return tw.Flush()
}

// capText renders an optional spend cap.
func capText(c *apd.Decimal) string {
	if c == nil {
		return "none"
	}
	return billing.Format(*c)
}
