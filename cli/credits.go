package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/billing"
	"github.com/svcgw/svcgw/money"
	"github.com/svcgw/svcgw/store"
)

type creditsCmd struct {
	Add     creditsAddCmd     `cmd:"" help:"Add prepaid credits (USD) to an account, or take them back with a negative amount."`
	Show    creditsShowCmd    `cmd:"" help:"Show an account's balance, spend and caps."`
	Cap     creditsCapCmd     `cmd:"" help:"Set or clear an account's daily and monthly spend caps and its requests and tokens per minute."`
	History creditsHistoryCmd `cmd:"" help:"List an account's credit transactions, newest first."`
}

type creditsAddCmd struct {
	Account        string `required:"" help:"Account name."`
	Amount         string `arg:"" help:"Amount in USD, e.g. 25 or 12.50 (at most six decimal places); negative (after --, e.g. -- -2.50) for a refund or correction, down to a zero balance."`
	Reference      string `help:"What paid for it, e.g. a payment id (stripe:pi_…)."`
	Note           string `default:"cli" help:"A note kept with the transaction."`
	IdempotencyKey string `name:"idempotency-key" help:"Credit once however often the command is run with this key (as the management API's Idempotency-Key header): a rerun with the same key and arguments changes nothing; with other arguments it is refused."`
}

// Run makes the change through the store's Credit, as POST
// /admin/v1/accounts/{name}/credits does: the same rules, and the same
// audit entry, with the command line as its actor.
func (c *creditsAddCmd) Run(e *env, st store.DB) error {
	amount, err := parseSignedAmount(c.Amount)
	if err != nil {
		return err
	}
	acct, err := e.account(st, c.Account)
	if err != nil {
		return err
	}
	res, err := st.Credit(e.ctx, acct.ID, store.CreditRequest{
		Amount: amount, Reference: c.Reference, Note: c.Note, IdempotencyKey: c.IdempotencyKey,
	})
	if errors.Is(err, store.ErrIdempotencyMismatch) {
		return fmt.Errorf("--idempotency-key %q was used for another credit (another account, amount, reference or note): nothing changed", c.IdempotencyKey)
	}
	if err != nil {
		return err
	}
	switch {
	case res.Replayed:
		fmt.Fprintf(e.stderr, "--idempotency-key %q was used already, for this credit (%s USD on %s): nothing changed\n",
			c.IdempotencyKey, billing.Format(res.Tx.Amount), res.Tx.CreatedAt.Format(time.RFC3339))
	case amount.Sign() < 0:
		fmt.Fprintf(e.stderr, "took %s USD back from %q\n", billing.Format(*new(apd.Decimal).Neg(&amount)), res.Account.Name)
	default:
		fmt.Fprintf(e.stderr, "added %s USD to %q\n", billing.Format(amount), res.Account.Name)
	}
	return printAccount(e, st, res.Account, false)
}

// parseSignedAmount parses an amount as billing.ParseAmount does, with a
// leading minus sign allowed.
func parseSignedAmount(s string) (apd.Decimal, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	d, err := billing.ParseAmount(strings.TrimPrefix(s, "-"))
	if err != nil || !neg {
		return d, err
	}
	d.Neg(&d)
	return d, nil
}

type creditsHistoryCmd struct {
	Account string `required:"" help:"Account name."`
	Limit   int    `default:"50" help:"How many transactions, 1 to 500."`
	JSON    bool   `name:"json" help:"Print JSON, as GET /admin/v1/accounts/{name}/credits's data."`
}

func (c *creditsHistoryCmd) Run(e *env, st store.DB) error {
	acct, err := e.account(st, c.Account)
	if err != nil {
		return err
	}
	txs, _, err := st.ListCredits(e.ctx, acct.ID, store.CreditQuery{Limit: c.Limit})
	if err != nil {
		return err
	}
	if c.JSON {
		type txJSON struct {
			ID           int64   `json:"id"`
			Amount       string  `json:"amount"`
			Reference    string  `json:"reference"`
			Note         string  `json:"note"`
			Actor        string  `json:"actor"`
			BalanceAfter *string `json:"balance_after"`
			CreatedAt    string  `json:"created_at"`
		}
		out := make([]txJSON, 0, len(txs))
		for _, t := range txs {
			out = append(out, txJSON{t.ID, billing.Format(t.Amount), t.Reference, t.Note, t.Actor, capJSON(t.BalanceAfter), t.CreatedAt.Format(time.RFC3339)})
		}
		return writeJSONOut(e, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tAMOUNT\tBALANCE AFTER\tBY\tREFERENCE\tNOTE")
	for _, t := range txs {
		after := "-"
		if t.BalanceAfter != nil {
			after = billing.Format(*t.BalanceAfter)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.CreatedAt.Format(time.RFC3339), billing.Format(t.Amount), after, t.Actor, t.Reference, t.Note)
	}
	return tw.Flush()
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
			RPM            *int64  `json:"rpm"` // as GET /admin/v1/accounts/{name}
			TPM            *int64  `json:"tpm"`
		}{billing.Format(acct.Balance), billing.Format(acct.TotalUsed), today, month, capJSON(acct.DailyCap), capJSON(acct.MonthlyCap),
			acct.RPM, acct.TPM})
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
	RPM     string `name:"rpm" placeholder:"N|none" help:"Requests per minute across all of the account's keys, or none."`
	TPM     string `name:"tpm" placeholder:"N|none" help:"Tokens per minute across all of the account's keys, or none."`
}

// Run changes only the caps and limits given, through the call the
// management API's PATCH /admin/v1/accounts/{name} makes. A running server
// sees a raised cap at the next call it would otherwise refuse, and any
// change within a second.
func (c *creditsCapCmd) Run(e *env, st store.DB) error {
	if c.Daily == "" && c.Monthly == "" && c.RPM == "" && c.TPM == "" {
		return fmt.Errorf("nothing to change: give --daily, --monthly (an amount in USD, or none), --rpm or --tpm (a whole number, or none)")
	}
	var daily, monthly *apd.Decimal
	var rpm, tpm *int64
	var err error
	if c.RPM != "" {
		if rpm, err = parseAccountRate("rpm", c.RPM); err != nil {
			return err
		}
	}
	if c.TPM != "" {
		if tpm, err = parseAccountRate("tpm", c.TPM); err != nil {
			return err
		}
	}
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
		if c.RPM != "" {
			caps.RPM = rpm
		}
		if c.TPM != "" {
			caps.TPM = tpm
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "account %q: daily cap %s, monthly cap %s, rpm %s, tpm %s\n", acct.Name,
		capText(acct.DailyCap), capText(acct.MonthlyCap), accountRateText(acct.RPM), accountRateText(acct.TPM))
	return printAccount(e, st, acct, false)
}
