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
	// DailyCap and MonthlyCap cap the account's spend per UTC calendar day
	// and month; nil means no cap. billing enforces them.
	DailyCap, MonthlyCap *apd.Decimal
	// RPM and TPM limit the requests and tokens per minute of all of the
	// account's keys together, on top of each key's own; nil (or 0) means
	// no limit of the account's. The server enforces them.
	RPM, TPM  *int64
	CreatedAt time.Time
}

const accountColumns = `id, name, balance_micros, total_used_micros, daily_cap_micros, monthly_cap_micros, rpm_limit, tpm_limit, created_at`

// scanAccount reads the accountColumns of one row.
func scanAccount(sc Scanner) (Account, error) {
	var (
		a                  Account
		balance, used, cre int64
		daily, monthly     sql.NullInt64
		rpm, tpm           sql.NullInt64
	)
	if err := sc.Scan(&a.ID, &a.Name, &balance, &used, &daily, &monthly, &rpm, &tpm, &cre); err != nil {
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
	a.RPM, a.TPM = optInt(rpm), optInt(tpm)
	a.CreatedAt = FromMillis(cre)
	return a, nil
}

// EnsureAccount returns the account called name, creating it (with a zero
// balance) if it does not exist; created reports which happened. A name
// that is empty, too long, or has control characters or surrounding spaces
// is ErrInvalid.
func (s *Policy) EnsureAccount(ctx context.Context, name string) (acct Account, created bool, err error) {
	if err := checkName("account name", name); err != nil {
		return Account{}, false, err
	}
	err = s.db.WriteTx(ctx, "ensure account", func(tx Conn) error {
		// ON CONFLICT DO NOTHING returns no row for an existing name,
		// which is then read; an account is never deleted.
		var err error
		acct, err = scanAccount(tx.QueryRow(ctx,
			`INSERT INTO accounts (name, created_at) VALUES (?, ?)
			 ON CONFLICT (name) DO NOTHING
			 RETURNING `+accountColumns,
			name, Millis(s.now())))
		switch {
		case err == nil:
			created = true
			return s.recordAudit(ctx, tx, AuditAccountCreate, acct.Name, nil, accountView(acct))
		case errors.Is(err, sql.ErrNoRows):
			acct, err = scanAccount(tx.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = ?`, name))
			if err != nil {
				return fmt.Errorf("ensure account: select: %w", err)
			}
		default:
			return fmt.Errorf("ensure account: insert: %w", err)
		}
		return nil
	})
	if err != nil {
		return Account{}, false, err
	}
	return acct, created, nil
}

// AccountByName returns the account called name, or ErrNotFound.
func (s *Policy) AccountByName(ctx context.Context, name string) (Account, error) {
	a, err := scanAccount(s.db.Readers().QueryRow(ctx,
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
func (s *Policy) AccountByID(ctx context.Context, id int64) (Account, error) {
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	a, err := scanAccount(s.db.Readers().QueryRow(ctx,
		`SELECT `+accountColumns+` FROM accounts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, fmt.Errorf("account %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("account by id: %w", s.db.ReadErr(ctx, err))
	}
	return a, nil
}

// CountAccounts returns the number of accounts.
func (s *Policy) CountAccounts(ctx context.Context) (int, error) {
	var n int
	if err := s.db.Readers().QueryRow(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count accounts: %w", err)
	}
	return n, nil
}

// AddCredits raises the account's balance by amount, a positive amount
// with at most six decimal places (ErrInvalid), and records a
// credit_transactions row with note (Credit), and returns the updated
// account. An unknown account is ErrNotFound.
func (s *Policy) AddCredits(ctx context.Context, accountID int64, amount apd.Decimal, note string) (Account, error) {
	if amount.Sign() <= 0 {
		return Account{}, fmt.Errorf("add credits %s: %w: amount must be positive", amount.String(), ErrInvalid)
	}
	r, err := s.Credit(ctx, accountID, CreditRequest{Amount: amount, Note: note})
	if err != nil {
		return Account{}, err
	}
	return r.Account, nil
}

// Budget is what admission needs to know of an account, in micro-dollars.
type Budget struct {
	// Credits is every credit ever added: balance + total_used, a sum that
	// charges leave unchanged and only AddCredits raises.
	Credits int64
	// DailyCap and MonthlyCap are the spend caps, or NoCap.
	DailyCap, MonthlyCap int64
	// Leased is set when Credits counts only what this instance may
	// spend of the balance (a PostgreSQL balance lease), not all of it.
	Leased bool
	// Short is set when a lease grant could not give what a call asked:
	// the balance, less what every live instance holds, does not cover
	// it (or a cap does not).
	Short bool
}

// NoCap marks an absent cap or limit in Budget and KeyLimits micro-dollar
// fields.
const NoCap = -1

// BudgetSQL reads an account's credits and caps (Budget).
const BudgetSQL = `SELECT balance_micros + total_used_micros, daily_cap_micros, monthly_cap_micros FROM accounts WHERE id = ?`

// Budget reads the account's credits and caps. It is one indexed read; the
// server caches it briefly (see billing.Admission). An unknown account is
// ErrNotFound; a read past QueryTimeout is ErrUnavailable.
func (s *Policy) Budget(ctx context.Context, accountID int64) (Budget, error) {
	var (
		b              Budget
		daily, monthly sql.NullInt64
	)
	ctx, cancel := s.ReadCtx(ctx)
	defer cancel()
	err := s.db.BudgetRow(ctx, accountID).Scan(&b.Credits, &daily, &monthly)
	if errors.Is(err, sql.ErrNoRows) {
		return Budget{}, fmt.Errorf("budget: account %d: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return Budget{}, fmt.Errorf("budget: %w", s.db.ReadErr(ctx, err))
	}
	b.DailyCap, b.MonthlyCap = capMicros(daily), capMicros(monthly)
	return b, nil
}

func capMicros(v sql.NullInt64) int64 {
	if !v.Valid {
		return NoCap
	}
	return v.Int64
}

// Caps are an account's spend caps per UTC calendar day and month, and
// its rate limits across all of its keys. A nil cap means no cap; a cap of
// zero allows no spend at all. A nil or zero RPM or TPM means no limit of
// the account's own.
type Caps struct {
	Daily, Monthly *apd.Decimal
	RPM, TPM       *int64
}

// capColumn converts an optional cap to its stored form (NULL for none). A
// negative cap, or one with more than six decimal places, is ErrInvalid.
func capColumn(what string, c *apd.Decimal) (sql.NullInt64, error) {
	if c == nil {
		return sql.NullInt64{}, nil
	}
	v, err := toMicros(*c)
	if err != nil {
		return sql.NullInt64{}, fmt.Errorf("%s: %w", what, err)
	}
	if v < 0 {
		return sql.NullInt64{}, fmt.Errorf("%s %s: %w: must not be negative", what, c.String(), ErrInvalid)
	}
	return sql.NullInt64{Int64: v, Valid: true}, nil
}

// UpdateAccountCaps changes the account's spend caps and rate limits in one
// transaction: update gets the current caps and changes what it wants. It
// returns the updated account. An unknown account is ErrNotFound; a
// negative cap or limit, or a cap with more than six decimal places, is
// ErrInvalid. A running server sees a spend cap's change within its budget
// refresh interval (billing.Admission), and a rate limit's as it sees a
// key's (UpdateKeyLimits).
func (s *Policy) UpdateAccountCaps(ctx context.Context, accountID int64, update func(*Caps)) (Account, error) {
	var (
		a     Account
		rates bool // whether the rate limits changed
	)
	err := s.db.WriteTx(ctx, "update caps", func(tx Conn) error {
		var err error
		a, err = scanAccount(tx.QueryRow(ctx,
			`SELECT `+accountColumns+` FROM accounts WHERE id = ?`+s.db.Dialect().ForUpdate, accountID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("update caps: account %d: %w", accountID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update caps: select: %w", err)
		}
		c := Caps{Daily: a.DailyCap, Monthly: a.MonthlyCap, RPM: a.RPM, TPM: a.TPM}
		update(&c)
		daily, err := capColumn("daily cap", c.Daily)
		if err != nil {
			return fmt.Errorf("update caps: %w", err)
		}
		monthly, err := capColumn("monthly cap", c.Monthly)
		if err != nil {
			return fmt.Errorf("update caps: %w", err)
		}
		rpm, err := intColumn("requests per minute", c.RPM)
		if err != nil {
			return fmt.Errorf("update caps: %w", err)
		}
		tpm, err := intColumn("tokens per minute", c.TPM)
		if err != nil {
			return fmt.Errorf("update caps: %w", err)
		}
		before := a
		a, err = scanAccount(tx.QueryRow(ctx,
			`UPDATE accounts SET daily_cap_micros = ?, monthly_cap_micros = ?, rpm_limit = ?, tpm_limit = ? WHERE id = ? RETURNING `+accountColumns,
			daily, monthly, rpm, tpm, accountID))
		if err != nil {
			return fmt.Errorf("update caps: update: %w", err)
		}
		// Authentication caches the account's rate limits with each of
		// its keys (Key.AccountRPM): a change to them is a key change.
		if rates = !sameInt(before.RPM, a.RPM) || !sameInt(before.TPM, a.TPM); rates {
			if _, err := tx.Exec(ctx, bumpKeyChangesSQL); err != nil {
				return fmt.Errorf("update caps: count the change: %w", err)
			}
		}
		return s.recordAudit(ctx, tx, AuditAccountUpdate, a.Name, accountView(before), accountView(a))
	})
	if err != nil {
		return Account{}, err
	}
	if rates {
		s.auth.clear()
	}
	return a, nil
}

// sameInt reports whether a and b are both nil or point to equal values.
func sameInt(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
