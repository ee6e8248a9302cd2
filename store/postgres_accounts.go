package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The reads of the call path and the sealing keys on PostgreSQL: the same
// behaviour as the SQLite Store's methods of the same names, whose doc
// comments apply.

// pgq rewrites a query written with SQLite's ? placeholders into
// PostgreSQL's $1, $2, …: the queries both databases run alike are written
// once. None of them has a ? inside a literal.
func pgq(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// Budget reads the account's credits and caps, on the call path's pool.
func (p *Postgres) Budget(ctx context.Context, accountID int64) (Budget, error) {
	var (
		b              Budget
		daily, monthly sql.NullInt64
	)
	ctx, cancel := p.readCtx(ctx)
	defer cancel()
	err := p.call.QueryRow(ctx,
		`SELECT balance_micros + total_used_micros, daily_cap_micros, monthly_cap_micros FROM accounts WHERE id = $1`,
		accountID).Scan(&b.Credits, &daily, &monthly)
	if noRows(err) {
		return Budget{}, fmt.Errorf("budget: account %d: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return Budget{}, fmt.Errorf("budget: %w", p.readErr(ctx, err))
	}
	b.DailyCap, b.MonthlyCap = capMicros(daily), capMicros(monthly)
	return b, nil
}

// keyChanges reads the count of key changes (see authCache).
func (p *Postgres) keyChanges(ctx context.Context) (int64, error) {
	var n int64
	err := p.call.QueryRow(ctx, keyChangesSQL).Scan(&n)
	return n, p.readErr(ctx, err)
}

// activeKey reads the active key whose secret hashes to hash, on the call
// path's pool.
func (p *Postgres) activeKey(ctx context.Context, hash string) (Key, error) {
	k, err := scanKey(p.call.QueryRow(ctx,
		`SELECT `+keyColumns+`
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id
		 WHERE k.secret_sha256 = $1 AND k.revoked_at IS NULL`, hash))
	if noRows(err) {
		return Key{}, ErrNotFound
	}
	return k, p.readErr(ctx, err)
}

// SealKeys returns the sealing keys every instance shares, creating the
// first one if there is none; instances starting at once agree on it.
func (p *Postgres) SealKeys(ctx context.Context) ([]SealKey, error) {
	secret := make([]byte, 32)
	if _, err := io.ReadFull(p.rand, secret); err != nil {
		return nil, fmt.Errorf("seal keys: random: %w", err)
	}
	if _, err := p.w.Exec(ctx,
		`INSERT INTO seal_keys (id, secret, created_at)
		 SELECT 1, $1, $2 WHERE NOT EXISTS (SELECT 1 FROM seal_keys)
		 ON CONFLICT (id) DO NOTHING`, secret, ms(p.now())); err != nil {
		return nil, fmt.Errorf("seal keys: insert: %w", err)
	}
	rows, err := p.w.Query(ctx, `SELECT id, secret FROM seal_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("seal keys: select: %w", err)
	}
	defer rows.Close()
	var keys []SealKey
	for rows.Next() {
		var (
			id int32
			k  SealKey
		)
		if err := rows.Scan(&id, &k.Secret); err != nil {
			return nil, fmt.Errorf("seal keys: scan: %w", err)
		}
		k.ID = byte(id)
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("seal keys: select: %w", err)
	}
	return keys, nil
}
