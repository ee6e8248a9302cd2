package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svcgw/svcgw/store"
)

type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Create a key (and its account if new); prints only the key on stdout."`
	List   keysListCmd   `cmd:"" help:"List keys (never their secrets) with their limits."`
	Limit  keysLimitCmd  `cmd:"" help:"Change a key's spend caps and rate limits."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke a key by its public id."`
}

type keysCreateCmd struct {
	Account      string `required:"" help:"Account name; created if missing."`
	Name         string `help:"A label for the key; the application name when callers send no X-Title or Referer. Unset: default for an account's first key, default-2, default-3… for the next ones."`
	DailyLimit   string `name:"daily-limit" placeholder:"USD" help:"Cap on this key's spend per UTC day (none if unset)."`
	MonthlyLimit string `name:"monthly-limit" placeholder:"USD" help:"Cap on this key's spend per UTC month (none if unset)."`
	RPM          string `name:"rpm" placeholder:"N" help:"Requests per minute (0 = unlimited); the server's --rpm if unset."`
	TPM          string `name:"tpm" placeholder:"N" help:"Tokens per minute (0 = unlimited); the server's --tpm if unset."`
	ExpiresAt    string `name:"expires-at" placeholder:"TIME" help:"When the key stops working, RFC 3339 (2026-12-31T23:59:59Z); it is then refused, saying it expired. Never if unset."`
}

// limits parses the limit flags that are set.
func (c *keysCreateCmd) limits() (store.KeyLimits, error) {
	l, _, err := parseKeyLimits(c.DailyLimit, c.MonthlyLimit, c.RPM, c.TPM, "daily-limit", "monthly-limit")
	if err != nil || c.ExpiresAt == "" {
		return l, err
	}
	l.ExpiresAt, err = parseExpiry("expires-at", c.ExpiresAt)
	return l, err
}

// parseExpiry parses a key's expiry: an RFC 3339 time, or "none" (nil).
func parseExpiry(flag, s string) (*time.Time, error) {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("--%s %q: want an RFC 3339 time such as 2026-12-31T23:59:59Z, or none", flag, s)
	}
	return &t, nil
}

// Run prints only the secret on stdout, so KEY=$(svcgw keys create …) works;
// everything else goes to stderr.
func (c *keysCreateCmd) Run(e *env, st store.DB) error {
	limits, err := c.limits()
	if err != nil {
		return err
	}
	acct, created, err := st.EnsureAccount(e.ctx, c.Account)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(e.stderr, "created account %q\n", acct.Name)
	}
	name := c.Name
	if name == "" {
		if name, err = unusedName(e, st, acct.ID); err != nil {
			return err
		}
	}
	// The same call, rules and audit entry as POST
	// /admin/v1/accounts/{name}/keys.
	secret, key, err := st.IssueKey(e.ctx, acct.ID, name, limits)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "created key %s (%s) for account %q; the secret below is shown only once\n", key.ID, key.Name, acct.Name)
	fmt.Fprintln(e.stdout, secret)
	return nil
}

// unusedName names a key created without --name: "default", or
// "default-N" for the first N from 2 that none of the account's keys has,
// so that keys list tells unnamed keys apart.
func unusedName(e *env, st store.DB, accountID int64) (string, error) {
	keys, err := st.ListKeys(e.ctx, accountID)
	if err != nil {
		return "", err
	}
	taken := make(map[string]bool, len(keys))
	for _, k := range keys {
		taken[k.Name] = true
	}
	name := "default"
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("default-%d", n)
	}
	return name, nil
}

type keysListCmd struct {
	Account string `help:"Only this account's keys."`
	JSON    bool   `name:"json" help:"Print JSON."`
}

func (c *keysListCmd) Run(e *env, st store.DB) error {
	var accountID int64
	if c.Account != "" {
		acct, err := e.account(st, c.Account)
		if err != nil {
			return err
		}
		accountID = acct.ID
	}
	keys, err := st.ListKeys(e.ctx, accountID)
	if err != nil {
		return err
	}
	if c.JSON {
		type keyJSON struct {
			ID         string  `json:"id"`
			Account    string  `json:"account"`
			Name       string  `json:"name"`
			CreatedAt  string  `json:"created_at"`
			RevokedAt  *string `json:"revoked_at"`
			DailyCap   *string `json:"daily_cap"`   // USD; null: none
			MonthlyCap *string `json:"monthly_cap"` // USD; null: none
			RPM        *int64  `json:"rpm"`         // null: the server default; 0: unlimited
			TPM        *int64  `json:"tpm"`
			ExpiresAt  *string `json:"expires_at"` // null: never
		}
		out := make([]keyJSON, 0, len(keys))
		for _, k := range keys {
			kj := keyJSON{ID: k.ID, Account: k.AccountName, Name: k.Name, CreatedAt: k.CreatedAt.Format(time.RFC3339),
				DailyCap: capJSON(k.Limits.DailyCap), MonthlyCap: capJSON(k.Limits.MonthlyCap), RPM: k.Limits.RPM, TPM: k.Limits.TPM}
			if !k.RevokedAt.IsZero() {
				r := k.RevokedAt.Format(time.RFC3339)
				kj.RevokedAt = &r
			}
			if x := k.Limits.ExpiresAt; x != nil {
				s := x.UTC().Format(time.RFC3339)
				kj.ExpiresAt = &s
			}
			out = append(out, kj)
		}
		return writeJSONOut(e, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tNAME\tCREATED\tSTATUS\tDAILY CAP\tMONTHLY CAP\tRPM\tTPM")
	for _, k := range keys {
		status := "active"
		switch x := k.Limits.ExpiresAt; {
		case !k.RevokedAt.IsZero():
			status = "revoked " + k.RevokedAt.Format(time.RFC3339)
		case x != nil && !time.Now().Before(*x):
			status = "expired " + x.UTC().Format(time.RFC3339)
		case x != nil:
			status = "expires " + x.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.AccountName, k.Name, k.CreatedAt.Format(time.RFC3339), status,
			capText(k.Limits.DailyCap), capText(k.Limits.MonthlyCap), rateText(k.Limits.RPM), rateText(k.Limits.TPM))
	}
	return tw.Flush()
}

type keysLimitCmd struct {
	KeyID   string `arg:"" name:"key-id" help:"The key's public id (key_…), as keys list shows it."`
	Daily   string `placeholder:"USD|none" help:"Cap on this key's spend per UTC day, or none."`
	Monthly string `placeholder:"USD|none" help:"Cap on this key's spend per UTC month, or none."`
	RPM     string `name:"rpm" placeholder:"N|default" help:"Requests per minute (0 = unlimited), or default (the server's --rpm)."`
	TPM     string `name:"tpm" placeholder:"N|default" help:"Tokens per minute (0 = unlimited), or default (the server's --tpm)."`
	Expires string `placeholder:"TIME|none" help:"When the key stops working, RFC 3339 (2026-12-31T23:59:59Z), or none."`
}

// Run changes only the limits given; a running server applies them to the
// key's next call.
func (c *keysLimitCmd) Run(e *env, st store.DB) error {
	if c.Daily == "" && c.Monthly == "" && c.RPM == "" && c.TPM == "" && c.Expires == "" {
		return fmt.Errorf("nothing to change: give --daily, --monthly, --rpm, --tpm or --expires")
	}
	l, _, err := parseKeyLimits(c.Daily, c.Monthly, c.RPM, c.TPM, "daily", "monthly")
	if err != nil {
		return err
	}
	if c.Expires != "" {
		if l.ExpiresAt, err = parseExpiry("expires", c.Expires); err != nil {
			return err
		}
	}
	k, err := st.UpdateKeyLimits(e.ctx, c.KeyID, func(cur *store.KeyLimits) {
		if c.Daily != "" {
			cur.DailyCap = l.DailyCap
		}
		if c.Monthly != "" {
			cur.MonthlyCap = l.MonthlyCap
		}
		if c.RPM != "" {
			cur.RPM = l.RPM
		}
		if c.TPM != "" {
			cur.TPM = l.TPM
		}
		if c.Expires != "" {
			cur.ExpiresAt = l.ExpiresAt
		}
	})
	if err != nil {
		return e.keyError(c.KeyID, err)
	}
	fmt.Fprintf(e.stderr, "key %s of account %q: daily cap %s, monthly cap %s, rpm %s, tpm %s\n", k.ID, k.AccountName,
		capText(k.Limits.DailyCap), capText(k.Limits.MonthlyCap), rateText(k.Limits.RPM), rateText(k.Limits.TPM))
	return nil
}

// parseKeyLimits parses keys create's limit flags; set reports whether any
// was given.
func parseKeyLimits(daily, monthly, rpm, tpm, dailyFlag, monthlyFlag string) (l store.KeyLimits, set bool, err error) {
	if daily != "" {
		if l.DailyCap, err = parseCap(dailyFlag, daily); err != nil {
			return l, false, err
		}
	}
	if monthly != "" {
		if l.MonthlyCap, err = parseCap(monthlyFlag, monthly); err != nil {
			return l, false, err
		}
	}
	if rpm != "" {
		if l.RPM, err = parseRate("rpm", rpm); err != nil {
			return l, false, err
		}
	}
	if tpm != "" {
		if l.TPM, err = parseRate("tpm", tpm); err != nil {
			return l, false, err
		}
	}
	return l, daily != "" || monthly != "" || rpm != "" || tpm != "", nil
}

type keysRevokeCmd struct {
	KeyID string `arg:"" name:"key-id" help:"The key's public id (key_…), as keys list shows it."`
}

// Run revokes the key, or says when it was revoked already: revoking
// twice keeps the first time (store.RevokeKey), which is older than this
// command.
func (c *keysRevokeCmd) Run(e *env, st store.DB) error {
	start := time.Now().Truncate(time.Millisecond) // the ledger's resolution
	k, err := st.RevokeKey(e.ctx, c.KeyID)
	if err != nil {
		return e.keyError(c.KeyID, err)
	}
	if k.RevokedAt.Before(start) {
		fmt.Fprintf(e.stderr, "key %s of account %q was already revoked, at %s; nothing changed\n",
			k.ID, k.AccountName, k.RevokedAt.UTC().Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(e.stderr, "revoked key %s of account %q\n", k.ID, k.AccountName)
	return nil
}

func writeJSONOut(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
