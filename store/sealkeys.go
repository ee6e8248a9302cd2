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
func (s *Policy) SealKeys(ctx context.Context) ([]SealKey, error) {
	secret := make([]byte, 32)
	if _, err := io.ReadFull(s.rand, secret); err != nil {
		return nil, fmt.Errorf("seal keys: random: %w", err)
	}
	var keys []SealKey
	err := s.db.WriteTx(ctx, "seal keys", func(tx Conn) error {
		// ON CONFLICT: processes starting at once (instances on
		// PostgreSQL) agree on the first key.
		if _, err := tx.Exec(ctx,
			`INSERT INTO seal_keys (id, secret, created_at)
			 SELECT 1, ?, ? WHERE NOT EXISTS (SELECT 1 FROM seal_keys)
			 ON CONFLICT (id) DO NOTHING`,
			secret, Millis(s.now())); err != nil {
			return fmt.Errorf("seal keys: insert: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT id, secret FROM seal_keys ORDER BY id`)
		if err != nil {
			return fmt.Errorf("seal keys: select: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id int32
				k  SealKey
			)
			if err := rows.Scan(&id, &k.Secret); err != nil {
				return fmt.Errorf("seal keys: scan: %w", err)
			}
			k.ID = byte(id)
			keys = append(keys, k)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("seal keys: select: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}
