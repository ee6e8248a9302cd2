package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"
)

type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Create a key (and its account if new); prints only the key on stdout."`
	List   keysListCmd   `cmd:"" help:"List keys (never their secrets)."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke a key by its public id."`
}

type keysCreateCmd struct {
	Account string `required:"" help:"Account name; created if missing."`
	Name    string `default:"default" help:"A label for the key; the application name when callers send no X-Title or Referer."`
}

// Run prints only the secret on stdout, so KEY=$(svcgw keys create …) works;
// everything else goes to stderr.
func (c *keysCreateCmd) Run(e *env) error {
	st, err := e.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	acct, created, err := st.EnsureAccount(e.ctx, c.Account)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(e.stderr, "created account %q\n", acct.Name)
	}
	secret, key, err := st.CreateKey(e.ctx, acct.ID, c.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "created key %s (%s) for account %q; the secret below is shown only once\n", key.ID, key.Name, acct.Name)
	fmt.Fprintln(e.stdout, secret)
	return nil
}

type keysListCmd struct {
	Account string `help:"Only this account's keys."`
	JSON    bool   `name:"json" help:"Print JSON."`
}

func (c *keysListCmd) Run(e *env) error {
	st, err := e.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	var accountID int64
	if c.Account != "" {
		acct, err := st.AccountByName(e.ctx, c.Account)
		if err != nil {
			return fmt.Errorf("account %q: %w", c.Account, err)
		}
		accountID = acct.ID
	}
	keys, err := st.ListKeys(e.ctx, accountID)
	if err != nil {
		return err
	}
	if c.JSON {
		type keyJSON struct {
			ID        string  `json:"id"`
			Account   string  `json:"account"`
			Name      string  `json:"name"`
			CreatedAt string  `json:"created_at"`
			RevokedAt *string `json:"revoked_at"`
		}
		out := make([]keyJSON, 0, len(keys))
		for _, k := range keys {
			kj := keyJSON{ID: k.ID, Account: k.AccountName, Name: k.Name, CreatedAt: k.CreatedAt.Format(time.RFC3339)}
			if !k.RevokedAt.IsZero() {
				r := k.RevokedAt.Format(time.RFC3339)
				kj.RevokedAt = &r
			}
			out = append(out, kj)
		}
		return writeJSONOut(e, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tNAME\tCREATED\tSTATUS")
	for _, k := range keys {
		status := "active"
		if !k.RevokedAt.IsZero() {
			status = "revoked " + k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.AccountName, k.Name, k.CreatedAt.Format(time.RFC3339), status)
	}
	return tw.Flush()
}

type keysRevokeCmd struct {
	KeyID string `arg:"" name:"key-id" help:"The key's public id (key_…), as keys list shows it."`
}

func (c *keysRevokeCmd) Run(e *env) error {
	st, err := e.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	k, err := st.RevokeKey(e.ctx, c.KeyID)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", c.KeyID, err)
	}
	fmt.Fprintf(e.stderr, "revoked key %s of account %q\n", k.ID, k.AccountName)
	return nil
}

func writeJSONOut(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
