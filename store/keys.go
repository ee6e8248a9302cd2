package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// Key is an API key's public record. The secret itself is shown once, by
// CreateKey, and never stored.
type Key struct {
	// ID is the public key id, "key_" + 16 lowercase hex digits; it is what
	// lists and usage buckets show.
	ID          string
	AccountID   int64
	AccountName string
	// Name is the key's label, "default" unless one was given.
	Name      string
	CreatedAt time.Time
	// RevokedAt is zero while the key is active.
	RevokedAt time.Time
	// Limits are the key's own spend caps and rate limits.
	Limits KeyLimits
	// AccountRPM and AccountTPM are its account's requests and tokens per
	// minute across all of the account's keys (Account.RPM, TPM): nil or
	// 0, none.
	AccountRPM, AccountTPM *int64
}

// KeyLimits are the limits of one key, on top of its account's.
type KeyLimits struct {
	// DailyCap and MonthlyCap cap the key's own spend per UTC calendar day
	// and month; nil means no cap.
	DailyCap, MonthlyCap *apd.Decimal
	// RPM and TPM limit requests and tokens per minute; nil means the
	// server's default, 0 means unlimited.
	RPM, TPM *int64
	// ExpiresAt, when set, is when the key stops working: Authenticate
	// refuses it from then on with ErrExpired. nil: never.
	ExpiresAt *time.Time
}

// SecretPrefix starts every API key secret.
const SecretPrefix = "llm_live_"

const (
	secretLen = 40 // random base62 characters after SecretPrefix
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// keyColumns are the columns ScanKey reads, from api_keys k joined with
// accounts a.
const keyColumns = `k.id, k.account_id, a.name, k.name, k.created_at, k.revoked_at,
	k.daily_cap_micros, k.monthly_cap_micros, k.rpm_limit, k.tpm_limit, k.expires_at,
	a.rpm_limit, a.tpm_limit`

func ScanKey(sc Scanner) (Key, error) {
	var (
		k                       Key
		created                 int64
		revoked, daily, monthly sql.NullInt64
		rpm, tpm, expires       sql.NullInt64
		acctRPM, acctTPM        sql.NullInt64
	)
	if err := sc.Scan(&k.ID, &k.AccountID, &k.AccountName, &k.Name, &created, &revoked,
		&daily, &monthly, &rpm, &tpm, &expires, &acctRPM, &acctTPM); err != nil {
		return Key{}, err
	}
	k.CreatedAt = FromMillis(created)
	if revoked.Valid {
		k.RevokedAt = FromMillis(revoked.Int64)
	}
	k.Limits.DailyCap = optMoney(daily)
	k.Limits.MonthlyCap = optMoney(monthly)
	k.Limits.RPM = optInt(rpm)
	k.Limits.TPM = optInt(tpm)
	k.AccountRPM, k.AccountTPM = optInt(acctRPM), optInt(acctTPM)
	if expires.Valid {
		t := FromMillis(expires.Int64)
		k.Limits.ExpiresAt = &t
	}
	return k, nil
}

func optMoney(v sql.NullInt64) *apd.Decimal {
	if !v.Valid {
		return nil
	}
	d := fromMicros(v.Int64)
	return &d
}

func optInt(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

func intColumn(what string, v *int64) (sql.NullInt64, error) {
	if v == nil {
		return sql.NullInt64{}, nil
	}
	if *v < 0 {
		return sql.NullInt64{}, fmt.Errorf("%s %d: %w: must not be negative", what, *v, ErrInvalid)
	}
	return sql.NullInt64{Int64: *v, Valid: true}, nil
}

// hashSecret is the stored form of a secret: SHA-256, lowercase hex. A fast
// hash is enough because secrets are 40 random base62 characters (about 238
// bits), far beyond guessing.
func hashSecret(secret string) string {
	// On the stack for any secret svcgw issues (one allocation a call,
	// the string, instead of three).
	var in [96]byte
	sum := sha256.Sum256(append(in[:0], secret...))
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// newKeyID returns "key_" + 16 lowercase hex digits from src.
func newKeyID(src io.Reader) (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(src, b[:]); err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	return "key_" + hex.EncodeToString(b[:]), nil
}

// newSecret returns SecretPrefix + secretLen base62 characters from src.
// Bytes of 248 and above are skipped so that every character is equally
// likely (248 = 4 × 62).
func newSecret(src io.Reader) (string, error) {
	var sb strings.Builder
	sb.Grow(len(SecretPrefix) + secretLen)
	sb.WriteString(SecretPrefix)
	buf := make([]byte, secretLen+secretLen/4)
	for n := 0; n < secretLen; {
		if _, err := io.ReadFull(src, buf); err != nil {
			return "", fmt.Errorf("key secret: %w", err)
		}
		for _, b := range buf {
			if b >= 248 || n == secretLen {
				continue
			}
			sb.WriteByte(base62[b%62])
			n++
		}
	}
	return sb.String(), nil
}

// CreateKey issues a key for the account, labelled name ("default" if
// empty), with no limits of its own (IssueKey).
func (s *Policy) CreateKey(ctx context.Context, accountID int64, name string) (secret string, k Key, err error) {
	return s.IssueKey(ctx, accountID, name, KeyLimits{})
}

// IssueKey issues a key for the account, labelled name ("default" if
// empty), with the limits l, and returns its secret, which is not stored
// and cannot be shown again. An unknown account is ErrNotFound; a bad
// label, a negative limit, a cap with more than six decimal places or an
// expiry that is not in the future is ErrInvalid.
func (s *Policy) IssueKey(ctx context.Context, accountID int64, name string, l KeyLimits) (secret string, k Key, err error) {
	if name == "" {
		name = "default"
	}
	if err := checkName("key name", name); err != nil {
		return "", Key{}, err
	}
	cols, err := limitColumns(l)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}
	if l.ExpiresAt != nil && !l.ExpiresAt.After(s.now()) {
		return "", Key{}, fmt.Errorf("create key: expires_at %s: %w: not in the future", l.ExpiresAt.UTC().Format(time.RFC3339), ErrInvalid)
	}
	id, err := newKeyID(s.rand)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}
	secret, err = newSecret(s.rand)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}
	k = Key{ID: id, AccountID: accountID, Name: name, CreatedAt: FromMillis(Millis(s.now()))}
	err = s.db.WriteTx(ctx, "create key", func(tx Conn) error {
		err := tx.QueryRow(ctx, `SELECT name FROM accounts WHERE id = ?`, accountID).Scan(&k.AccountName)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("create key: account %d: %w", accountID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("create key: account: %w", err)
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO api_keys (id, account_id, name, secret_sha256, created_at,
			   daily_cap_micros, monthly_cap_micros, rpm_limit, tpm_limit, expires_at)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, accountID, name, hashSecret(secret), Millis(k.CreatedAt),
			cols.daily, cols.monthly, cols.rpm, cols.tpm, cols.expires); err != nil {
			return fmt.Errorf("create key: insert: %w", err)
		}
		if k, err = ScanKey(tx.QueryRow(ctx, keyByIDSQL, k.ID)); err != nil {
			return fmt.Errorf("create key: reread: %w", err)
		}
		return s.recordAudit(ctx, tx, AuditKeyCreate, k.ID, nil, keyView(k))
	})
	if err != nil {
		return "", Key{}, err
	}
	return secret, k, nil
}

// ListKeys returns the keys of the account, or of every account when
// accountID is 0, revoked ones included, oldest first.
func (s *Policy) ListKeys(ctx context.Context, accountID int64) ([]Key, error) {
	rows, err := s.db.Readers().Query(ctx,
		`SELECT `+keyColumns+`
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id
		 WHERE CAST(? AS BIGINT) = 0 OR k.account_id = ?
		 ORDER BY k.created_at, `+s.db.Dialect().KeyOrder,
		accountID, accountID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var keys []Key
	for rows.Next() {
		k, err := ScanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: scan: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return keys, nil
}

// keyByIDSQL reads the key with the public id given.
const keyByIDSQL = `SELECT ` + keyColumns + ` FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?`

// RevokeKey revokes the key with the public id keyID and returns it. Revoking
// a revoked key changes nothing and returns it with its original RevokedAt.
// An unknown id is ErrNotFound. Every other process that serves calls
// (another instance) stops accepting it within its authentication cache's
// TTL; this one at once.
func (s *Policy) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	var k Key
	err := s.db.WriteTx(ctx, "revoke key", func(tx Conn) error {
		before, err := ScanKey(tx.QueryRow(ctx, keyByIDSQL+s.db.Dialect().ForUpdate, keyID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("revoke key %q: %w", keyID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("revoke key: select: %w", err)
		}
		if !before.RevokedAt.IsZero() {
			k = before
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
			Millis(s.now()), keyID); err != nil {
			return fmt.Errorf("revoke key: update: %w", err)
		}
		if _, err := tx.Exec(ctx, bumpKeyChangesSQL); err != nil {
			return fmt.Errorf("revoke key: count the change: %w", err)
		}
		if k, err = ScanKey(tx.QueryRow(ctx, keyByIDSQL, keyID)); err != nil {
			return fmt.Errorf("revoke key: reread: %w", err)
		}
		return s.recordAudit(ctx, tx, AuditKeyRevoke, k.ID, keyView(before), keyView(k))
	})
	if err != nil {
		return Key{}, err
	}
	s.auth.clear()
	return k, nil
}

// KeyChangesSQL reads the count of key changes; bumpKeyChangesSQL adds one
// to it, in the transaction of every change to a key that authentication
// caches (see authCache).
const (
	KeyChangesSQL     = `SELECT n FROM key_changes WHERE id = 1`
	bumpKeyChangesSQL = `UPDATE key_changes SET n = n + 1 WHERE id = 1`
)

// KeySQL reads the active key whose secret hashes to the argument
// (ActiveKey).
const KeySQL = `SELECT ` + keyColumns + `
	 FROM api_keys k JOIN accounts a ON a.id = k.account_id
	 WHERE k.secret_sha256 = ? AND k.revoked_at IS NULL`

// UpdateKeyLimits changes the limits of the key with the public id keyID in
// one transaction: update gets the current limits and changes what it
// wants. It returns the updated key. An unknown id is ErrNotFound; a
// negative value, or a cap with more than six decimal places, ErrInvalid.
// This process applies the change to its next call; every other one
// within its authentication cache's TTL.
func (s *Policy) UpdateKeyLimits(ctx context.Context, keyID string, update func(*KeyLimits)) (Key, error) {
	var k Key
	err := s.db.WriteTx(ctx, "update key limits", func(tx Conn) error {
		var err error
		k, err = ScanKey(tx.QueryRow(ctx, keyByIDSQL+s.db.Dialect().ForUpdate, keyID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("update key limits %q: %w", keyID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update key limits: select: %w", err)
		}
		before := k
		l := k.Limits
		update(&l)
		c, err := limitColumns(l)
		if err != nil {
			return fmt.Errorf("update key limits: %w", err)
		}
		if _, err := tx.Exec(ctx,
			`UPDATE api_keys SET daily_cap_micros = ?, monthly_cap_micros = ?, rpm_limit = ?, tpm_limit = ?, expires_at = ? WHERE id = ?`,
			c.daily, c.monthly, c.rpm, c.tpm, c.expires, keyID); err != nil {
			return fmt.Errorf("update key limits: update: %w", err)
		}
		if _, err := tx.Exec(ctx, bumpKeyChangesSQL); err != nil {
			return fmt.Errorf("update key limits: count the change: %w", err)
		}
		if k, err = ScanKey(tx.QueryRow(ctx, keyByIDSQL, keyID)); err != nil {
			return fmt.Errorf("update key limits: reread: %w", err)
		}
		return s.recordAudit(ctx, tx, AuditKeyUpdate, k.ID, keyView(before), keyView(k))
	})
	if err != nil {
		return Key{}, err
	}
	s.auth.clear()
	return k, nil
}

// keyLimitColumns are KeyLimits in their stored form.
type keyLimitColumns struct {
	daily, monthly, rpm, tpm, expires sql.NullInt64
}

// limitColumns converts l to its stored form: a negative value, or a cap
// with more than six decimal places, is ErrInvalid.
func limitColumns(l KeyLimits) (c keyLimitColumns, err error) {
	if c.daily, err = capColumn("daily cap", l.DailyCap); err != nil {
		return c, err
	}
	if c.monthly, err = capColumn("monthly cap", l.MonthlyCap); err != nil {
		return c, err
	}
	if c.rpm, err = intColumn("requests per minute", l.RPM); err != nil {
		return c, err
	}
	if c.tpm, err = intColumn("tokens per minute", l.TPM); err != nil {
		return c, err
	}
	if l.ExpiresAt != nil {
		c.expires = sql.NullInt64{Int64: Millis(*l.ExpiresAt), Valid: true}
	}
	return c, nil
}
