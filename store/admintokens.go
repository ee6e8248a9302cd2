package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AdminToken is an admin token's public record: what the management API
// (/admin/v1) and the rest of the admin listener are authenticated with.
// The secret is shown once, by CreateAdminToken, and never stored.
type AdminToken struct {
	// ID is the public id, "adm_" + 16 lowercase hex digits.
	ID string
	// Name is the token's label, unique among active tokens; the audit
	// log names the changes made with the token by it.
	Name string
	// ReadOnly tokens may read everything and change nothing.
	ReadOnly  bool
	CreatedAt time.Time
	// RevokedAt is zero while the token is active.
	RevokedAt time.Time
}

// AdminSecretPrefix starts every admin token secret, so that one is never
// taken for an API key (SecretPrefix) or the other way round.
const AdminSecretPrefix = "svcgw_admin_"

const adminTokenColumns = `id, name, read_only, created_at, revoked_at`

func scanAdminToken(sc Scanner) (AdminToken, error) {
	var (
		t        AdminToken
		readOnly int64
		created  int64
		revoked  sql.NullInt64
	)
	if err := sc.Scan(&t.ID, &t.Name, &readOnly, &created, &revoked); err != nil {
		return AdminToken{}, err
	}
	t.ReadOnly = readOnly != 0
	t.CreatedAt = FromMillis(created)
	if revoked.Valid {
		t.RevokedAt = FromMillis(revoked.Int64)
	}
	return t, nil
}

// CreateAdminToken issues an admin token called name, read-only or not,
// and returns its secret, which is not stored and cannot be shown again.
// A bad name is ErrInvalid; the name of an active token, ErrConflict.
func (s *Policy) CreateAdminToken(ctx context.Context, name string, readOnly bool) (secret string, t AdminToken, err error) {
	if err := checkName("admin token name", name); err != nil {
		return "", AdminToken{}, err
	}
	if name == ActorCLI {
		// The audit log names the command line's changes so.
		return "", AdminToken{}, fmt.Errorf("admin token name %q: %w: reserved for the command line", name, ErrInvalid)
	}
	id, err := newKeyID(s.rand)
	if err != nil {
		return "", AdminToken{}, fmt.Errorf("create admin token: %w", err)
	}
	secret, err = newSecret(s.rand)
	if err != nil {
		return "", AdminToken{}, fmt.Errorf("create admin token: %w", err)
	}
	secret = AdminSecretPrefix + strings.TrimPrefix(secret, SecretPrefix)
	t = AdminToken{ID: "adm_" + strings.TrimPrefix(id, "key_"), Name: name, ReadOnly: readOnly, CreatedAt: FromMillis(Millis(s.now()))}
	ro := 0
	if readOnly {
		ro = 1
	}
	err = s.db.WriteTx(ctx, "create admin token", func(tx Conn) error {
		// The partial unique index on active names makes a taken name
		// insert nothing, on either engine.
		n, err := tx.Exec(ctx,
			`INSERT INTO admin_tokens (id, name, secret_sha256, read_only, created_at) VALUES (?, ?, ?, ?, ?)
			 ON CONFLICT DO NOTHING`,
			t.ID, name, hashSecret(secret), ro, Millis(t.CreatedAt))
		if err != nil {
			return fmt.Errorf("create admin token: insert: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("create admin token: an active token is called %q: %w", name, ErrConflict)
		}
		return s.recordAudit(ctx, tx, AuditAdminTokenCreate, t.ID, nil, tokenView(t))
	})
	if err != nil {
		return "", AdminToken{}, err
	}
	return secret, t, nil
}

// ListAdminTokens returns every admin token, revoked ones included, oldest
// first.
func (s *Policy) ListAdminTokens(ctx context.Context) ([]AdminToken, error) {
	rows, err := s.db.Readers().Query(ctx, `SELECT `+adminTokenColumns+` FROM admin_tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list admin tokens: %w", err)
	}
	defer rows.Close()
	var out []AdminToken
	for rows.Next() {
		t, err := scanAdminToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list admin tokens: scan: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list admin tokens: %w", err)
	}
	return out, nil
}

// RevokeAdminToken revokes the admin token whose id, or active token's
// name, is ref, and returns it; it is refused from its next request on, on
// every instance (AuthenticateAdmin reads the database each time).
// Revoking a revoked token changes nothing. An unknown ref is ErrNotFound.
func (s *Policy) RevokeAdminToken(ctx context.Context, ref string) (AdminToken, error) {
	var t AdminToken
	err := s.db.WriteTx(ctx, "revoke admin token", func(tx Conn) error {
		var err error
		t, err = scanAdminToken(tx.QueryRow(ctx,
			`SELECT `+adminTokenColumns+` FROM admin_tokens WHERE id = ? OR (name = ? AND revoked_at IS NULL)
			 ORDER BY revoked_at IS NULL DESC LIMIT 1`+s.db.Dialect().ForUpdate, ref, ref))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("revoke admin token %q: %w", ref, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("revoke admin token: select: %w", err)
		}
		if !t.RevokedAt.IsZero() {
			return nil
		}
		before := tokenView(t)
		t.RevokedAt = FromMillis(Millis(s.now()))
		if _, err := tx.Exec(ctx, `UPDATE admin_tokens SET revoked_at = ? WHERE id = ?`, Millis(t.RevokedAt), t.ID); err != nil {
			return fmt.Errorf("revoke admin token: update: %w", err)
		}
		return s.recordAudit(ctx, tx, AuditAdminTokenRevoke, t.ID, before, tokenView(t))
	})
	if err != nil {
		return AdminToken{}, err
	}
	return t, nil
}

// AuthenticateAdmin returns the active admin token whose secret is secret;
// an unknown or revoked one is ErrNotFound, without saying which. It reads
// the database on every request: admin requests are few, and a revoked
// token must stop at once everywhere.
func (s *Policy) AuthenticateAdmin(ctx context.Context, secret string) (AdminToken, error) {
	if !strings.HasPrefix(secret, AdminSecretPrefix) {
		return AdminToken{}, fmt.Errorf("authenticate admin: %w", ErrNotFound)
	}
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	t, err := scanAdminToken(s.db.Readers().QueryRow(ctx,
		`SELECT `+adminTokenColumns+` FROM admin_tokens WHERE secret_sha256 = ? AND revoked_at IS NULL`, hashSecret(secret)))
	if errors.Is(err, sql.ErrNoRows) {
		return AdminToken{}, fmt.Errorf("authenticate admin: %w", ErrNotFound)
	}
	if err != nil {
		return AdminToken{}, fmt.Errorf("authenticate admin: %w", s.db.ReadErr(ctx, err))
	}
	return t, nil
}
