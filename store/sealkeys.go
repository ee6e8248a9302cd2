package store

import (
	"context"
	"fmt"
	"io"
)

// SealKey is a key of the seal_keys table (migration 0002).
type SealKey struct {
	ID     byte
	Secret []byte // 32 bytes
}

// SealKeys returns the sealing keys every instance on this database shares,
// creating the first one (from the store's random source) if there is none.
// Two instances starting at once agree: the insert of key 1 happens at most
// once, and both read the table after it.
func (s *Store) SealKeys(ctx context.Context) ([]SealKey, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("seal keys: begin: %w", err)
	}
	defer tx.Rollback()
	secret := make([]byte, 32)
	if _, err := io.ReadFull(s.rand, secret); err != nil {
		return nil, fmt.Errorf("seal keys: random: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO seal_keys (id, secret, created_at)
		 SELECT 1, ?, ? WHERE NOT EXISTS (SELECT 1 FROM seal_keys)`,
		secret, ms(s.now())); err != nil {
		return nil, fmt.Errorf("seal keys: insert: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, secret FROM seal_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("seal keys: select: %w", err)
	}
	defer rows.Close()
	var keys []SealKey
	for rows.Next() {
		var k SealKey
		if err := rows.Scan(&k.ID, &k.Secret); err != nil {
			return nil, fmt.Errorf("seal keys: scan: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("seal keys: select: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("seal keys: commit: %w", err)
	}
	return keys, nil
}
