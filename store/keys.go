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
}

// SecretPrefix starts every API key secret.
const SecretPrefix = "llm_live_"

const (
	secretLen = 40 // random base62 characters after SecretPrefix
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// keyColumns are the columns scanKey reads, from api_keys k joined with
// accounts a.
const keyColumns = `k.id, k.account_id, a.name, k.name, k.created_at, k.revoked_at`

func scanKey(sc scanner) (Key, error) {
	var (
		k       Key
		created int64
		revoked sql.NullInt64
	)
	if err := sc.Scan(&k.ID, &k.AccountID, &k.AccountName, &k.Name, &created, &revoked); err != nil {
		return Key{}, err
	}
	k.CreatedAt = fromMS(created)
	if revoked.Valid {
		k.RevokedAt = fromMS(revoked.Int64)
	}
	return k, nil
}

// hashSecret is the stored form of a secret: SHA-256, lowercase hex. A fast
// hash is enough because secrets are 40 random base62 characters (about 238
// bits), far beyond guessing.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
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
// empty), and returns its secret, which is not stored and cannot be shown
// again. An unknown account is ErrNotFound; a bad label is ErrInvalid.
func (s *Store) CreateKey(ctx context.Context, accountID int64, name string) (secret string, k Key, err error) {
	if name == "" {
		name = "default"
	}
	if err := checkName("key name", name); err != nil {
		return "", Key{}, err
	}
	id, err := newKeyID(s.rand)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}
	secret, err = newSecret(s.rand)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}

	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: begin: %w", err)
	}
	defer tx.Rollback()

	k = Key{ID: id, AccountID: accountID, Name: name, CreatedAt: fromMS(ms(s.now()))}
	err = tx.QueryRowContext(ctx, `SELECT name FROM accounts WHERE id = ?`, accountID).Scan(&k.AccountName)
	if errors.Is(err, sql.ErrNoRows) {
		return "", Key{}, fmt.Errorf("create key: account %d: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: account: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO api_keys (id, account_id, name, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, accountID, name, hashSecret(secret), ms(k.CreatedAt)); err != nil {
		return "", Key{}, fmt.Errorf("create key: insert: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", Key{}, fmt.Errorf("create key: commit: %w", err)
	}
	return secret, k, nil
}

// ListKeys returns the keys of the account, or of every account when
// accountID is 0, revoked ones included, oldest first.
func (s *Store) ListKeys(ctx context.Context, accountID int64) ([]Key, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT `+keyColumns+`
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id
		 WHERE ? = 0 OR k.account_id = ?
		 ORDER BY k.created_at, k.rowid`,
		accountID, accountID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var keys []Key
	for rows.Next() {
		k, err := scanKey(rows)
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

// RevokeKey revokes the key with the public id keyID and returns it. Revoking
// a revoked key changes nothing and returns it with its original RevokedAt.
// An unknown id is ErrNotFound.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Key{}, fmt.Errorf("revoke key: begin: %w", err)
	}
	defer tx.Rollback()

	if _, err := tx.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
		ms(s.now()), keyID); err != nil {
		return Key{}, fmt.Errorf("revoke key: update: %w", err)
	}
	k, err := scanKey(tx.QueryRowContext(ctx,
		`SELECT `+keyColumns+` FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?`,
		keyID))
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, fmt.Errorf("revoke key %q: %w", keyID, ErrNotFound)
	}
	if err != nil {
		return Key{}, fmt.Errorf("revoke key: select: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Key{}, fmt.Errorf("revoke key: commit: %w", err)
	}
	return k, nil
}

// Authenticate returns the active key whose secret is secret. An unknown or
// revoked secret is ErrNotFound, without saying which. This is the hot path
// of every request: one indexed read on the reader pool.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, error) {
	if !strings.HasPrefix(secret, SecretPrefix) {
		return Key{}, fmt.Errorf("authenticate: %w", ErrNotFound)
	}
	k, err := scanKey(s.r.QueryRowContext(ctx,
		`SELECT `+keyColumns+`
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id
		 WHERE k.secret_sha256 = ? AND k.revoked_at IS NULL`,
		hashSecret(secret)))
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, fmt.Errorf("authenticate: %w", ErrNotFound)
	}
	if err != nil {
		return Key{}, fmt.Errorf("authenticate: %w", err)
	}
	return k, nil
}
