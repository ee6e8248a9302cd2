package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/svcgw/svcgw/store"
)

type adminCmd struct {
	Tokens adminTokensCmd `cmd:"" help:"Create, list and revoke admin tokens."`
	Audit  adminAuditCmd  `cmd:"" help:"Show the audit log: every change made through the management API or the command line (as GET /admin/v1/audit)."`
}

type adminAuditCmd struct {
	Limit int  `default:"50" help:"How many entries, newest first, 1 to 500."`
	JSON  bool `name:"json" help:"Print JSON, with each entry's before and after."`
}

func (c *adminAuditCmd) Run(e *env, st store.DB) error {
	entries, _, err := st.ListAudit(e.ctx, store.AuditQuery{Limit: c.Limit})
	if err != nil {
		return err
	}
	if c.JSON {
		type entryJSON struct {
			ID        int64           `json:"id"`
			CreatedAt string          `json:"created_at"`
			Actor     string          `json:"actor"`
			Action    string          `json:"action"`
			Target    string          `json:"target"`
			Before    json.RawMessage `json:"before"`
			After     json.RawMessage `json:"after"`
		}
		out := make([]entryJSON, 0, len(entries))
		for _, a := range entries {
			out = append(out, entryJSON{a.ID, a.CreatedAt.Format(time.RFC3339Nano), a.Actor, a.Action, a.Target, a.Before, a.After})
		}
		return writeJSONOut(e, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWHEN\tWHO\tWHAT\tTARGET")
	for _, a := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", a.ID, a.CreatedAt.Format(time.RFC3339), a.Actor, a.Action, a.Target)
	}
	return tw.Flush()
}

type adminTokensCmd struct {
	Create adminTokensCreateCmd `cmd:"" help:"Create an admin token; prints only the token on stdout, this once."`
	List   adminTokensListCmd   `cmd:"" help:"List admin tokens (never their secrets)."`
	Revoke adminTokensRevokeCmd `cmd:"" help:"Revoke an admin token by its id or name; refused from its next request on."`
}

type adminTokensCreateCmd struct {
	Name     string `required:"" help:"A name for the token, unique among active ones; the audit log names its changes by it."`
	ReadOnly bool   `name:"read-only" help:"The token may read everything and change nothing (403 on every change): for a dashboard or a report."`
}

// Run prints only the secret on stdout, so TOKEN=$(svcgw admin tokens
// create …) works; everything else goes to stderr.
func (c *adminTokensCreateCmd) Run(e *env, st store.DB) error {
	secret, t, err := st.CreateAdminToken(e.ctx, c.Name, c.ReadOnly)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("an active admin token is called %q: revoke it first, or choose another name", c.Name)
	}
	if err != nil {
		return err
	}
	kind := "read-write"
	if t.ReadOnly {
		kind = "read-only"
	}
	fmt.Fprintf(e.stderr, "created %s admin token %s (%s); the secret below is shown only once\n", kind, t.ID, t.Name)
	fmt.Fprintln(e.stdout, secret)
	return nil
}

type adminTokensListCmd struct {
	JSON bool `name:"json" help:"Print JSON."`
}

func (c *adminTokensListCmd) Run(e *env, st store.DB) error {
	tokens, err := st.ListAdminTokens(e.ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		type tokenJSON struct {
			ID        string  `json:"id"`
			Name      string  `json:"name"`
			ReadOnly  bool    `json:"read_only"`
			CreatedAt string  `json:"created_at"`
			RevokedAt *string `json:"revoked_at"`
		}
		out := make([]tokenJSON, 0, len(tokens))
		for _, t := range tokens {
			tj := tokenJSON{ID: t.ID, Name: t.Name, ReadOnly: t.ReadOnly, CreatedAt: t.CreatedAt.Format(time.RFC3339)}
			if !t.RevokedAt.IsZero() {
				r := t.RevokedAt.Format(time.RFC3339)
				tj.RevokedAt = &r
			}
			out = append(out, tj)
		}
		return writeJSONOut(e, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tACCESS\tCREATED\tSTATUS")
	for _, t := range tokens {
		access, status := "read-write", "active"
		if t.ReadOnly {
			access = "read-only"
		}
		if !t.RevokedAt.IsZero() {
			status = "revoked " + t.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, access, t.CreatedAt.Format(time.RFC3339), status)
	}
	return tw.Flush()
}

type adminTokensRevokeCmd struct {
	Token string `arg:"" name:"id-or-name" help:"The token's id (adm_…) or an active token's name, as admin tokens list shows them."`
}

func (c *adminTokensRevokeCmd) Run(e *env, st store.DB) error {
	t, err := st.RevokeAdminToken(e.ctx, c.Token)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no admin token has the id or active name %q (svcgw admin tokens list shows them)", c.Token)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "revoked admin token %s (%s)\n", t.ID, t.Name)
	return nil
}
