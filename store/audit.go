package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
)

// ActorCLI is the actor the command line records its changes as.
const ActorCLI = "cli"

// actorUnknown is the actor of a change whose context names none (see
// WithActor): still recorded, never silent.
const actorUnknown = "unknown"

type actorKey struct{}

// WithActor returns ctx naming who makes the changes made with it: an
// admin token's name for the management API, ActorCLI for the command
// line. Every change to an account, a key, credits or an admin token
// records it in the audit log, in the change's own transaction.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// actorOf returns the actor WithActor put in ctx.
func actorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return actorUnknown
}

// AuditEntry is one change in the audit log.
type AuditEntry struct {
	ID        int64
	CreatedAt time.Time
	// Actor is who made it: an admin token's name, or "cli".
	Actor string
	// Action is what was done, e.g. "key.create" (see docs/admin-api.md).
	Action string
	// Target is what it was done to: an account name, a key id, an admin
	// token's id.
	Target string
	// Before and After are the target as JSON before and after the
	// change; nil for none (before a creation, say).
	Before, After json.RawMessage
}

// The actions of the audit log.
const (
	AuditAccountCreate    = "account.create"
	AuditAccountUpdate    = "account.update"
	AuditCreditsAdd       = "credits.add"
	AuditKeyCreate        = "key.create"
	AuditKeyUpdate        = "key.update"
	AuditKeyRevoke        = "key.revoke"
	AuditAdminTokenCreate = "admin_token.create"
	AuditAdminTokenRevoke = "admin_token.revoke"
)

// recordAudit adds an entry to the audit log in tx, the change's own
// transaction: the change and its trace commit together or not at all.
// before and after are marshalled to JSON; nil records NULL.
func (s *Policy) recordAudit(ctx context.Context, tx Conn, action, target string, before, after any) error {
	b, err := auditJSON(before)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	a, err := auditJSON(after)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO audit_log (created_at, actor, action, target, before, after) VALUES (?, ?, ?, ?, ?, ?)`,
		Millis(s.now()), actorOf(ctx), action, target, b, a); err != nil {
		return fmt.Errorf("audit %s: insert: %w", action, err)
	}
	return nil
}

func auditJSON(v any) (sql.NullString, error) {
	if v == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// AuditQuery pages the audit log, newest first.
type AuditQuery struct {
	// Before, when not 0, starts the page after the entry with this id
	// (the last of the previous page).
	Before int64
	// Limit is the page's size, 1 to 500 (100 when 0).
	Limit int
}

// ListAudit returns a page of the audit log, newest first, and whether
// there are older entries.
func (s *Policy) ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, bool, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, false, fmt.Errorf("list audit: %w", err)
	}
	rows, err := s.db.Readers().Query(ctx,
		`SELECT id, created_at, actor, action, target, before, after FROM audit_log
		 WHERE CAST(? AS BIGINT) = 0 OR id < ?
		 ORDER BY id DESC LIMIT ?`, q.Before, q.Before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var (
			e             AuditEntry
			at            int64
			before, after sql.NullString
		)
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &before, &after); err != nil {
			return nil, false, fmt.Errorf("list audit: scan: %w", err)
		}
		e.CreatedAt = FromMillis(at)
		if before.Valid {
			e.Before = json.RawMessage(before.String)
		}
		if after.Valid {
			e.After = json.RawMessage(after.String)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list audit: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// pageLimit checks a page size: 1 to maxPage, defaultPage when 0.
func pageLimit(n int) (int, error) {
	const defaultPage, maxPage = 100, 500
	switch {
	case n == 0:
		return defaultPage, nil
	case n < 0 || n > maxPage:
		return 0, fmt.Errorf("page size %d: %w: want 1 to %d", n, ErrInvalid, maxPage)
	}
	return n, nil
}

// The audit log's views of what changed: what an operator reading it
// needs, never a secret.

type auditAccount struct {
	Name       string  `json:"name"`
	Balance    string  `json:"balance"`
	DailyCap   *string `json:"daily_cap"`
	MonthlyCap *string `json:"monthly_cap"`
	RPM        *int64  `json:"rpm"`
	TPM        *int64  `json:"tpm"`
}

func accountView(a Account) auditAccount {
	return auditAccount{Name: a.Name, Balance: usdText(a.Balance), DailyCap: decimalText(a.DailyCap), MonthlyCap: decimalText(a.MonthlyCap),
		RPM: a.RPM, TPM: a.TPM}
}

type auditKey struct {
	ID           string  `json:"id"`
	Account      string  `json:"account"`
	Name         string  `json:"name"`
	DailyLimit   *string `json:"daily_limit"`
	MonthlyLimit *string `json:"monthly_limit"`
	RPM          *int64  `json:"rpm"`
	TPM          *int64  `json:"tpm"`
	ExpiresAt    *string `json:"expires_at"`
	RevokedAt    *string `json:"revoked_at"`
}

func keyView(k Key) auditKey {
	v := auditKey{ID: k.ID, Account: k.AccountName, Name: k.Name,
		DailyLimit: decimalText(k.Limits.DailyCap), MonthlyLimit: decimalText(k.Limits.MonthlyCap),
		RPM: k.Limits.RPM, TPM: k.Limits.TPM}
	if k.Limits.ExpiresAt != nil {
		t := k.Limits.ExpiresAt.UTC().Format(time.RFC3339Nano)
		v.ExpiresAt = &t
	}
	if !k.RevokedAt.IsZero() {
		t := k.RevokedAt.Format(time.RFC3339Nano)
		v.RevokedAt = &t
	}
	return v
}

type auditToken struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	ReadOnly  bool    `json:"read_only"`
	RevokedAt *string `json:"revoked_at"`
}

func tokenView(t AdminToken) auditToken {
	v := auditToken{ID: t.ID, Name: t.Name, ReadOnly: t.ReadOnly}
	if !t.RevokedAt.IsZero() {
		r := t.RevokedAt.Format(time.RFC3339Nano)
		v.RevokedAt = &r
	}
	return v
}

// decimalText renders an optional amount in USD; nil for none.
func decimalText(d *apd.Decimal) *string {
	if d == nil {
		return nil
	}
	s := usdText(*d)
	return &s
}

// usdText renders an amount the store holds (whole micro-dollars) with six
// decimal places, as every amount appears.
func usdText(d apd.Decimal) string {
	m, err := money.FromDecimal(d)
	if err != nil {
		return d.Text('f')
	}
	return m.String()
}
