package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgx/v5"
)

// Accounts, keys, feedback and sealing keys on PostgreSQL: the same
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

// EnsureAccount returns the account called name, creating it if needed.
func (p *Postgres) EnsureAccount(ctx context.Context, name string) (acct Account, created bool, err error) {
	if err := checkName("account name", name); err != nil {
		return Account{}, false, err
	}
	// ON CONFLICT DO NOTHING returns no row for an existing name, which is
	// then read; an account is never deleted, so the read finds it.
	acct, err = scanAccount(p.w.QueryRow(ctx,
		`INSERT INTO accounts (name, created_at) VALUES ($1, $2)
		 ON CONFLICT (name) DO NOTHING
		 RETURNING `+accountColumns, name, ms(p.now())))
	switch {
	case err == nil:
		return acct, true, nil
	case noRows(err):
		acct, err = p.AccountByName(ctx, name)
		if err != nil {
			return Account{}, false, fmt.Errorf("ensure account: %w", err)
		}
		return acct, false, nil
	default:
		return Account{}, false, fmt.Errorf("ensure account: insert: %w", err)
	}
}

// AccountByName returns the account called name, or ErrNotFound.
func (p *Postgres) AccountByName(ctx context.Context, name string) (Account, error) {
	a, err := scanAccount(p.r.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = $1`, name))
	if noRows(err) {
		return Account{}, fmt.Errorf("account %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("account by name: %w", err)
	}
	return a, nil
}

// AccountByID returns the account with id, or ErrNotFound.
func (p *Postgres) AccountByID(ctx context.Context, id int64) (Account, error) {
	ctx, cancel := p.readCtx(ctx)
	defer cancel()
	a, err := scanAccount(p.r.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = $1`, id))
	if noRows(err) {
		return Account{}, fmt.Errorf("account %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("account by id: %w", p.readErr(ctx, err))
	}
	return a, nil
}

// CountAccounts returns the number of accounts.
func (p *Postgres) CountAccounts(ctx context.Context) (int, error) {
	var n int
	if err := p.r.QueryRow(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count accounts: %w", err)
	}
	return n, nil
}

// AddCredits raises the account's balance by amount and records the
// credit, in one transaction.
func (p *Postgres) AddCredits(ctx context.Context, accountID int64, amount apd.Decimal, note string) (Account, error) {
	micros, err := toMicros(amount)
	if err != nil {
		return Account{}, fmt.Errorf("add credits: %w", err)
	}
	if micros <= 0 {
		return Account{}, fmt.Errorf("add credits %s: %w: amount must be positive", amount.String(), ErrInvalid)
	}
	var a Account
	err = pgx.BeginFunc(ctx, p.w, func(tx pgx.Tx) error {
		var err error
		a, err = scanAccount(tx.QueryRow(ctx,
			`UPDATE accounts SET balance_micros = balance_micros + $1 WHERE id = $2 RETURNING `+accountColumns,
			micros, accountID))
		if noRows(err) {
			return fmt.Errorf("add credits: account %d: %w", accountID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("add credits: update balance: %w", err)
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO credit_transactions (account_id, amount_micros, note, created_at) VALUES ($1, $2, $3, $4)`,
			accountID, micros, note, ms(p.now())); err != nil {
			return fmt.Errorf("add credits: insert transaction: %w", err)
		}
		return nil
	})
	if err != nil {
		return Account{}, err
	}
	return a, nil
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

// UpdateAccountCaps changes the account's spend caps in one transaction.
func (p *Postgres) UpdateAccountCaps(ctx context.Context, accountID int64, update func(*Caps)) (Account, error) {
	var a Account
	err := pgx.BeginFunc(ctx, p.w, func(tx pgx.Tx) error {
		var err error
		a, err = scanAccount(tx.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = $1 FOR UPDATE`, accountID))
		if noRows(err) {
			return fmt.Errorf("update caps: account %d: %w", accountID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update caps: select: %w", err)
		}
		c := Caps{Daily: a.DailyCap, Monthly: a.MonthlyCap}
		update(&c)
		daily, err := capColumn("daily cap", c.Daily)
		if err != nil {
			return fmt.Errorf("update caps: %w", err)
		}
		monthly, err := capColumn("monthly cap", c.Monthly)
		if err != nil {
			return fmt.Errorf("update caps: %w", err)
		}
		a, err = scanAccount(tx.QueryRow(ctx,
			`UPDATE accounts SET daily_cap_micros = $1, monthly_cap_micros = $2 WHERE id = $3 RETURNING `+accountColumns,
			daily, monthly, accountID))
		if err != nil {
			return fmt.Errorf("update caps: update: %w", err)
		}
		return nil
	})
	if err != nil {
		return Account{}, err
	}
	return a, nil
}

// CreateKey issues a key for the account and returns its secret.
func (p *Postgres) CreateKey(ctx context.Context, accountID int64, name string) (secret string, k Key, err error) {
	if name == "" {
		name = "default"
	}
	if err := checkName("key name", name); err != nil {
		return "", Key{}, err
	}
	id, err := newKeyID(p.rand)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}
	secret, err = newSecret(p.rand)
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: %w", err)
	}
	k = Key{ID: id, AccountID: accountID, Name: name, CreatedAt: fromMS(ms(p.now()))}
	err = p.w.QueryRow(ctx,
		`INSERT INTO api_keys (id, account_id, name, secret_sha256, created_at)
		 SELECT $1, a.id, $3, $4, $5 FROM accounts a WHERE a.id = $2
		 RETURNING (SELECT name FROM accounts WHERE id = $2)`,
		k.ID, accountID, name, hashSecret(secret), ms(k.CreatedAt)).Scan(&k.AccountName)
	if noRows(err) {
		return "", Key{}, fmt.Errorf("create key: account %d: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return "", Key{}, fmt.Errorf("create key: insert: %w", err)
	}
	return secret, k, nil
}

// ListKeys returns the keys of the account, or of every account when
// accountID is 0, oldest first.
func (p *Postgres) ListKeys(ctx context.Context, accountID int64) ([]Key, error) {
	rows, err := p.r.Query(ctx,
		`SELECT `+keyColumns+`
		 FROM api_keys k JOIN accounts a ON a.id = k.account_id
		 WHERE $1::bigint = 0 OR k.account_id = $1
		 ORDER BY k.created_at, k.seq`, accountID)
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

const pgKeyByID = `SELECT ` + keyColumns + ` FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = $1`

// RevokeKey revokes the key with the public id keyID and returns it. Every
// instance stops accepting it within its authentication cache's TTL.
func (p *Postgres) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	var k Key
	err := pgx.BeginFunc(ctx, p.w, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`,
			ms(p.now()), keyID); err != nil {
			return fmt.Errorf("revoke key: update: %w", err)
		}
		if _, err := tx.Exec(ctx, bumpKeyChangesSQL); err != nil {
			return fmt.Errorf("revoke key: count the change: %w", err)
		}
		var err error
		k, err = scanKey(tx.QueryRow(ctx, pgKeyByID, keyID))
		if noRows(err) {
			return fmt.Errorf("revoke key %q: %w", keyID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("revoke key: select: %w", err)
		}
		return nil
	})
	if err != nil {
		return Key{}, err
	}
	p.auth.clear()
	return k, nil
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

// UpdateKeyLimits changes the limits of the key with the public id keyID
// in one transaction. Every instance applies the change within its
// authentication cache's TTL.
func (p *Postgres) UpdateKeyLimits(ctx context.Context, keyID string, update func(*KeyLimits)) (Key, error) {
	var k Key
	err := pgx.BeginFunc(ctx, p.w, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, pgKeyByID+` FOR UPDATE OF k`, keyID))
		if noRows(err) {
			return fmt.Errorf("update key limits %q: %w", keyID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update key limits: select: %w", err)
		}
		l := k.Limits
		update(&l)
		daily, err := capColumn("daily cap", l.DailyCap)
		if err != nil {
			return fmt.Errorf("update key limits: %w", err)
		}
		monthly, err := capColumn("monthly cap", l.MonthlyCap)
		if err != nil {
			return fmt.Errorf("update key limits: %w", err)
		}
		rpm, err := intColumn("requests per minute", l.RPM)
		if err != nil {
			return fmt.Errorf("update key limits: %w", err)
		}
		tpm, err := intColumn("tokens per minute", l.TPM)
		if err != nil {
			return fmt.Errorf("update key limits: %w", err)
		}
		if _, err := tx.Exec(ctx,
			`UPDATE api_keys SET daily_cap_micros = $1, monthly_cap_micros = $2, rpm_limit = $3, tpm_limit = $4 WHERE id = $5`,
			daily, monthly, rpm, tpm, keyID); err != nil {
			return fmt.Errorf("update key limits: update: %w", err)
		}
		if _, err := tx.Exec(ctx, bumpKeyChangesSQL); err != nil {
			return fmt.Errorf("update key limits: count the change: %w", err)
		}
		if k, err = scanKey(tx.QueryRow(ctx, pgKeyByID, keyID)); err != nil {
			return fmt.Errorf("update key limits: reread: %w", err)
		}
		return nil
	})
	if err != nil {
		return Key{}, err
	}
	p.auth.clear()
	return k, nil
}

// UpsertFeedback records f against the account's generation f.ID, or
// replaces the rating already recorded for (f.ID, f.EndUser).
func (p *Postgres) UpsertFeedback(ctx context.Context, accountID int64, f Feedback, maxAge time.Duration) (created bool, err error) {
	if f.Rating != "up" && f.Rating != "down" {
		return false, fmt.Errorf("feedback rating %q: %w", f.Rating, ErrInvalid)
	}
	var labels sql.NullString
	if f.Labels != nil {
		if !json.Valid(f.Labels) {
			return false, fmt.Errorf("feedback labels: %w: not JSON", ErrInvalid)
		}
		labels = sql.NullString{String: string(f.Labels), Valid: true}
	}
	ctx, cancel := p.readCtx(ctx)
	defer cancel()
	now := p.now()
	err = pgx.BeginFunc(ctx, p.w, func(tx pgx.Tx) error {
		// The generation's row is locked, so that two end users rating
		// it at once are counted one after the other.
		var genCreated int64
		err := tx.QueryRow(ctx, `SELECT created_at FROM generations WHERE id = $1 AND account_id = $2 FOR UPDATE`,
			f.ID, accountID).Scan(&genCreated)
		if noRows(err) {
			return fmt.Errorf("feedback: generation %q: %w", f.ID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("feedback: generation: %w", p.readErr(ctx, err))
		}
		if maxAge > 0 && now.Sub(fromMS(genCreated)) > maxAge {
			return fmt.Errorf("feedback: generation %q is older than %s: %w", f.ID, maxAge, ErrConflict)
		}
		var existing, raters int
		if err := tx.QueryRow(ctx,
			`SELECT COUNT(*) FILTER (WHERE end_user = $1), COUNT(*) FROM feedback WHERE account_id = $2 AND generation_id = $3`,
			f.EndUser, accountID, f.ID).Scan(&existing, &raters); err != nil {
			return fmt.Errorf("feedback: lookup: %w", err)
		}
		if existing == 0 && raters >= MaxFeedbackEndUsers {
			return fmt.Errorf("feedback: generation %q has %d end users' ratings: %w", f.ID, raters, ErrLimit)
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO feedback (account_id, generation_id, end_user, rating, comment, labels, created_at, updated_at)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
			 ON CONFLICT (account_id, generation_id, end_user) DO UPDATE SET
			   rating = excluded.rating, comment = excluded.comment,
			   labels = excluded.labels, updated_at = excluded.updated_at`,
			accountID, f.ID, f.EndUser, f.Rating, f.Comment, labels, ms(now)); err != nil {
			return fmt.Errorf("feedback: upsert: %w", err)
		}
		created = existing == 0
		return nil
	})
	if err != nil {
		return false, p.readErr(ctx, err)
	}
	return created, nil
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
