package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// Account is a billing account: a prepaid balance that generations debit
// and credits raise, shared by all of its keys.
type Account struct {
	ID   int64
	Name string
	// Balance is credits minus costs; it may go negative, since admission
	// is billing's decision, not the ledger's.
	Balance apd.Decimal
	// TotalUsed is the sum of all generation costs.
	TotalUsed apd.Decimal
	// DailyCap and MonthlyCap are spend caps; nil means no cap. They are
	// stored only: enforcing them is billing's job, in a later issue.
	DailyCap, MonthlyCap *apd.Decimal
	CreatedAt            time.Time
}

const accountColumns = `id, name, balance_micros, total_used_micros, daily_cap_micros, monthly_cap_micros, created_at`

// scanAccount reads the accountColumns of one row.
func scanAccount(sc scanner) (Account, error) {
	var (
		a                  Account
		balance, used, cre int64
		daily, monthly     sql.NullInt64
	)
	if err := sc.Scan(&a.ID, &a.Name, &balance, &used, &daily, &monthly, &cre); err != nil {
		return Account{}, err
	}
	a.Balance = fromMicros(balance)
	a.TotalUsed = fromMicros(used)
	if daily.Valid {
		d := fromMicros(daily.Int64)
		a.DailyCap = &d
	}
	if monthly.Valid {
		m := fromMicros(monthly.Int64)
		a.MonthlyCap = &m
	}
	a.CreatedAt = fromMS(cre)
	return a, nil
}

// EnsureAccount returns the account called name, creating it (with a zero
// balance) if it does not exist; created reports which happened. A name
// that is empty, too long, or has control characters or surrounding spaces
// is ErrInvalid.
func (s *Store) EnsureAccount(ctx context.Context, name string) (acct Account, created bool, err error) {
	if err := checkName("account name", name); err != nil {
		return Account{}, false, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Account{}, false, fmt.Errorf("ensure account: begin: %w", err)
	}
	defer tx.Rollback()

	acct, err = scanAccount(tx.QueryRowContext(ctx,
		`INSERT INTO accounts (name, created_at) VALUES (?, ?)
		 ON CONFLICT (name) DO NOTHING
		 RETURNING `+accountColumns,
		name, ms(s.now())))
	switch {
	case err == nil:
		created = true
	case errors.Is(err, sql.ErrNoRows):
		acct, err = scanAccount(tx.QueryRowContext(ctx,
			`SELECT `+accountColumns+` FROM accounts WHERE name = ?`, name))
		if err != nil {
			return Account{}, false, fmt.Errorf("ensure account: select: %w", err)
		}
	default:
		return Account{}, false, fmt.Errorf("ensure account: insert: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Account{}, false, fmt.Errorf("ensure account: commit: %w", err)
	}
	return acct, created, nil
}

// AccountByName returns the account called name, or ErrNotFound.
func (s *Store) AccountByName(ctx context.Context, name string) (Account, error) {
	a, err := scanAccount(s.r.QueryRowContext(ctx,
		`SELECT `+accountColumns+` FROM accounts WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, fmt.Errorf("account %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("account by name: %w", err)
	}
	return a, nil
}

// AccountByID returns the account with id, or ErrNotFound. It reads what is
// committed: call Sync first to see generations recorded just before.
func (s *Store) AccountByID(ctx context.Context, id int64) (Account, error) {
	a, err := scanAccount(s.r.QueryRowContext(ctx,
		`SELECT `+accountColumns+` FROM accounts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, fmt.Errorf("account %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("account by id: %w", err)
	}
	return a, nil
}

// CountAccounts returns the number of accounts.
func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count accounts: %w", err)
	}
	return n, nil
}

// AddCredits raises the account's balance by amount and records a
// credit_transactions row with note, in one transaction, and returns the
// updated account. amount must be positive with at most six decimal places
// (ErrInvalid); an unknown account is ErrNotFound.
func (s *Store) AddCredits(ctx context.Context, accountID int64, amount apd.Decimal, note string) (Account, error) {
	micros, err := toMicros(amount)
	if err != nil {
		return Account{}, fmt.Errorf("add credits: %w", err)
	}
	if micros <= 0 {
		return Account{}, fmt.Errorf("add credits %s: %w: amount must be positive", amount.String(), ErrInvalid)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Account{}, fmt.Errorf("add credits: begin: %w", err)
	}
	defer tx.Rollback()

	now := ms(s.now())
	// An overflowing sum would become REAL, which the STRICT table rejects.
	a, err := scanAccount(tx.QueryRowContext(ctx,
		`UPDATE accounts SET balance_micros = balance_micros + ? WHERE id = ?
		 RETURNING `+accountColumns,
		micros, accountID))
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, fmt.Errorf("add credits: account %d: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("add credits: update balance: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO credit_transactions (account_id, amount_micros, note, created_at) VALUES (?, ?, ?, ?)`,
		accountID, micros, note, now); err != nil {
		return Account{}, fmt.Errorf("add credits: insert transaction: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Account{}, fmt.Errorf("add credits: commit: %w", err)
	}
	return a, nil
}
