package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svcgw/svcgw/money"
)

// CreditRequest is a change to an account's balance made by an operator
// (Credit): a top-up, or a refund or correction when negative.
type CreditRequest struct {
	// Amount is in USD, with at most six decimal places; not zero.
	Amount apd.Decimal
	// Reference is the caller's id of what paid for it, e.g. a payment
	// id ("stripe:pi_…"); Note is free text. Both at most maxNoteLen bytes.
	Reference, Note string
	// IdempotencyKey, when not empty, makes a retry of the request
	// credit once: a second Credit with the same key returns the first's
	// transaction (Replayed), on whichever instance it runs; with another
	// account, amount, reference or note it is ErrIdempotencyMismatch.
	IdempotencyKey string
}

// CreditTx is one credit transaction.
type CreditTx struct {
	ID          int64
	AccountID   int64
	AccountName string
	Amount      apd.Decimal
	Reference   string
	Note        string
	// Actor is who made it (see WithActor); empty for transactions made
	// before svcgw recorded it.
	Actor string
	// BalanceAfter is the account's balance right after the transaction;
	// nil for transactions made before svcgw recorded it.
	BalanceAfter   *apd.Decimal
	IdempotencyKey string
	CreatedAt      time.Time
}

// CreditResult is what Credit did.
type CreditResult struct {
	Tx CreditTx
	// Account is the account after the transaction, as it is now when
	// Replayed.
	Account Account
	// Replayed is set when the request's idempotency key had been used:
	// Tx is then the first request's transaction, and nothing changed.
	Replayed bool
}

// Credit sentinel errors; both match ErrInvalid or ErrConflict too, for
// callers that need only the kind.
var (
	// ErrNegativeBalance refuses a negative credit larger than the
	// balance: refunds and corrections go down to zero, never below.
	ErrNegativeBalance = fmt.Errorf("%w: the balance would go below zero", ErrInvalid)
	// ErrIdempotencyMismatch refuses an idempotency key used before for
	// a different request.
	ErrIdempotencyMismatch = fmt.Errorf("%w: idempotency key used for a different request", ErrConflict)
)

// maxNoteLen bounds a credit's reference, note and idempotency key, in
// bytes.
const maxNoteLen = 512

const creditColumns = `c.id, c.account_id, a.name, c.amount_micros, c.reference, c.note, c.actor,
	c.balance_after_micros, c.idempotency_key, c.created_at`

func scanCredit(sc Scanner) (CreditTx, error) {
	var (
		t              CreditTx
		amount, at     int64
		after          sql.NullInt64
		idempotencyKey sql.NullString
	)
	if err := sc.Scan(&t.ID, &t.AccountID, &t.AccountName, &amount, &t.Reference, &t.Note, &t.Actor,
		&after, &idempotencyKey, &at); err != nil {
		return CreditTx{}, err
	}
	t.Amount = fromMicros(amount)
	t.BalanceAfter = optMoney(after)
	t.IdempotencyKey = idempotencyKey.String
	t.CreatedAt = FromMillis(at)
	return t, nil
}

// fingerprint is the SHA-256 of what a credit request says, compared when
// its idempotency key comes again.
func (r CreditRequest) fingerprint(accountID, micros int64) string {
	h := sha256.New()
	for _, s := range []string{strconv.FormatInt(accountID, 10), strconv.FormatInt(micros, 10), r.Reference, r.Note} {
		// Length-prefixed, so that no two requests share a byte stream.
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Credit changes the account's balance by req.Amount and records the
// credit transaction and its audit entry, in one transaction, under the
// account's row lock. A positive amount may not bring the account's
// credits past money.MaxCreditsMicros, a negative one may not bring the
// balance below zero (ErrNegativeBalance); zero, or more than six decimal
// places, is ErrInvalid. An unknown account is ErrNotFound.
//
// On an engine whose instances hold slices of the balance to spend
// (BalanceHolder: PostgreSQL's leases), a negative amount may take only
// what they do not hold: what they hold, they may spend. When what they
// hold stands in the way, they are asked to give back what no call in
// progress holds (and the slices of instances gone are taken back), and
// the credit is tried again, a few times while that frees more; it is
// refused only when the balance less what calls in progress hold cannot
// cover it.
//
// With an idempotency key, the key's uniqueness in the database makes a
// retry credit once, however often and on whichever instance it is sent:
// the account's row lock orders the requests for one account, and the
// unique index those for different accounts (whose second insert waits
// for the first's transaction and then finds its row).
func (s *Policy) Credit(ctx context.Context, accountID int64, req CreditRequest) (CreditResult, error) {
	micros, err := req.check()
	if err != nil {
		return CreditResult{}, err
	}
	holder, _ := s.db.(BalanceHolder)
	var held Held
	before := int64(-1)
	for round := 0; ; round++ {
		var res CreditResult
		err = s.db.WriteTx(ctx, "credit", func(tx Conn) error {
			a, err := scanAccount(tx.QueryRow(ctx,
				`SELECT `+accountColumns+` FROM accounts WHERE id = ?`+s.db.Dialect().ForUpdate, accountID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("credit: account %d: %w", accountID, ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("credit: select account: %w", err)
			}
			if micros < 0 && holder != nil {
				if held, err = holder.HeldBalance(ctx, tx, accountID, held.Gone); err != nil {
					return fmt.Errorf("credit: read what the instances hold: %w", err)
				}
			}
			res, err = s.credit(ctx, tx, a, micros, req, held.Micros)
			return err
		})
		var he *heldError
		if err == nil || !errors.As(err, &he) || held.Reclaim == nil || round == maxReclaims ||
			(before >= 0 && held.Micros >= before && len(held.Gone) == 0) {
			return res, err // done, or asking again frees nothing more
		}
		before = held.Micros
		held.Reclaim(ctx)
	}
}

// maxReclaims bounds the rounds a negative credit asks the instances for
// what they hold idle (see Credit).
const maxReclaims = 3

// BalanceHolder is an engine whose instances hold slices of accounts'
// balances, each spending its own without asking the database
// (PostgreSQL's balance leases). What they hold is the balance's too, but
// it is not there to be taken back by a negative credit: once it is
// spent, the balance would be below zero.
type BalanceHolder interface {
	// HeldBalance reads, in tx, which holds the account's row lock (so
	// that no instance is granted more meanwhile), what the instances'
	// live slices of the account's balance hold unspent: charges of
	// theirs still queued, what their calls in progress have reserved,
	// and what is idle. The slices of the instances in gone (found gone
	// by the last read) that still are gone are taken back first.
	HeldBalance(ctx context.Context, tx Conn, accountID int64, gone []string) (Held, error)
}

// Held is what the instances hold unspent of one account's balance.
type Held struct {
	Micros int64
	// Gone are instances that seemed gone (their database sessions
	// ended): the next read takes their slices back if they still are.
	Gone []string
	// Reclaim, when not nil, asks the instances holding some of it to
	// give back what no call in progress holds, and waits for their
	// answers (under a second), or for instances that seemed gone to
	// stay so: a read after it finds less held, unless calls took it
	// meanwhile. It runs outside any transaction.
	Reclaim func(ctx context.Context)
}

// heldError is a negative credit refused because of what the instances
// hold (Held), not of the balance alone: asking them to give back what is
// idle may let it through.
type heldError struct{ err error }

func (e *heldError) Error() string { return e.err.Error() }
func (e *heldError) Unwrap() error { return e.err }

// check checks what of the request can be checked without the account,
// and returns its amount in micro-dollars.
func (r CreditRequest) check() (int64, error) {
	micros, err := toMicros(r.Amount)
	if err != nil {
		return 0, fmt.Errorf("credit: amount: %w", err)
	}
	if micros == 0 {
		return 0, fmt.Errorf("credit: %w: amount must not be zero", ErrInvalid)
	}
	for _, f := range [...]struct{ what, v string }{{"reference", r.Reference}, {"note", r.Note}, {"idempotency key", r.IdempotencyKey}} {
		if len(f.v) > maxNoteLen {
			return 0, fmt.Errorf("credit: %s: %w: longer than %d bytes", f.what, ErrInvalid, maxNoteLen)
		}
	}
	return micros, nil
}

// credit is Credit in tx, which holds the row lock of a, the account, of
// whose balance the instances hold held micro-dollars unspent (see
// BalanceHolder).
func (s *Policy) credit(ctx context.Context, tx Conn, a Account, micros int64, req CreditRequest, held int64) (CreditResult, error) {
	res := CreditResult{Account: a}
	fp := req.fingerprint(a.ID, micros)
	if req.IdempotencyKey != "" {
		if replayed, err := s.replayCredit(ctx, tx, req.IdempotencyKey, fp, &res); err != nil || replayed {
			return res, err
		}
	}
	balance, _ := toMicros(a.Balance)
	used, _ := toMicros(a.TotalUsed)
	switch {
	case micros < 0 && balance+micros < 0:
		return res, fmt.Errorf("credit %s USD to %q with a balance of %s USD: %w",
			usdText(fromMicros(micros)), a.Name, usdText(a.Balance), ErrNegativeBalance)
	case micros < 0 && balance+micros < held:
		return res, &heldError{fmt.Errorf("credit %s USD to %q with a balance of %s USD, of which the instances serving it hold %s USD for calls in progress; retry when they end: %w",
			usdText(fromMicros(micros)), a.Name, usdText(a.Balance), usdText(fromMicros(held)), ErrNegativeBalance)}
	case micros > 0 && balance+used > money.MaxCreditsMicros-micros:
		return res, fmt.Errorf("credit %s USD to %q: %w: the account's credits (balance plus total used) would go past the maximum of %s USD",
			usdText(fromMicros(micros)), a.Name, ErrInvalid, usdText(fromMicros(money.MaxCreditsMicros)))
	}
	var key sql.NullString
	if req.IdempotencyKey != "" {
		key = sql.NullString{String: req.IdempotencyKey, Valid: true}
	}
	var id int64
	err := tx.QueryRow(ctx,
		`INSERT INTO credit_transactions (account_id, amount_micros, note, created_at, reference, actor,
		   balance_after_micros, idempotency_key, request_sha256)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (idempotency_key) DO NOTHING
		 RETURNING id`,
		a.ID, micros, req.Note, Millis(s.now()), req.Reference, actorOf(ctx), balance+micros, key, fp).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		// The key was taken meanwhile, for another account (whose row
		// lock this transaction does not hold): the insert waited for
		// that transaction, and the row is there now.
		if replayed, err := s.replayCredit(ctx, tx, req.IdempotencyKey, fp, &res); err != nil || replayed {
			return res, err
		}
		return res, fmt.Errorf("credit: idempotency key %q taken, and its transaction not found", req.IdempotencyKey)
	}
	if err != nil {
		return res, fmt.Errorf("credit: insert transaction: %w", err)
	}
	before := accountView(a)
	if res.Account, err = scanAccount(tx.QueryRow(ctx,
		`UPDATE accounts SET balance_micros = balance_micros + ? WHERE id = ? RETURNING `+accountColumns,
		micros, a.ID)); err != nil {
		return res, fmt.Errorf("credit: update balance: %w", err)
	}
	if res.Tx, err = scanCredit(tx.QueryRow(ctx,
		`SELECT `+creditColumns+` FROM credit_transactions c JOIN accounts a ON a.id = c.account_id WHERE c.id = ?`, id)); err != nil {
		return res, fmt.Errorf("credit: reread: %w", err)
	}
	return res, s.recordAudit(ctx, tx, AuditCreditsAdd, a.Name, before, struct {
		auditAccount
		Transaction creditView `json:"transaction"`
	}{accountView(res.Account), viewCredit(res.Tx)})
}

// replayCredit looks up the transaction made under key: found with the
// fingerprint fp, it fills res and reports true; found with another, it is
// ErrIdempotencyMismatch.
func (s *Policy) replayCredit(ctx context.Context, tx Conn, key, fp string, res *CreditResult) (bool, error) {
	var got string
	err := tx.QueryRow(ctx, `SELECT request_sha256 FROM credit_transactions WHERE idempotency_key = ?`, key).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("credit: read idempotency key: %w", err)
	}
	if got != fp {
		return false, fmt.Errorf("credit: idempotency key %q: %w", key, ErrIdempotencyMismatch)
	}
	t, err := scanCredit(tx.QueryRow(ctx,
		`SELECT `+creditColumns+` FROM credit_transactions c JOIN accounts a ON a.id = c.account_id WHERE c.idempotency_key = ?`, key))
	if err != nil {
		return false, fmt.Errorf("credit: read idempotency key: %w", err)
	}
	res.Tx, res.Replayed = t, true
	return true, nil
}

type creditView struct {
	ID        int64  `json:"id"`
	Amount    string `json:"amount"`
	Reference string `json:"reference"`
	Note      string `json:"note"`
}

func viewCredit(t CreditTx) creditView {
	return creditView{ID: t.ID, Amount: usdText(t.Amount), Reference: t.Reference, Note: t.Note}
}

// CreditQuery pages an account's credit transactions, newest first.
type CreditQuery struct {
	// Before, when not 0, starts the page after the transaction with
	// this id (the last of the previous page).
	Before int64
	// Limit is the page's size, 1 to 500 (100 when 0).
	Limit int
}

// ListCredits returns a page of the account's credit transactions, newest
// first, and whether there are older ones.
func (s *Policy) ListCredits(ctx context.Context, accountID int64, q CreditQuery) ([]CreditTx, bool, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, false, fmt.Errorf("list credits: %w", err)
	}
	rows, err := s.db.Readers().Query(ctx,
		`SELECT `+creditColumns+` FROM credit_transactions c JOIN accounts a ON a.id = c.account_id
		 WHERE c.account_id = ? AND (CAST(? AS BIGINT) = 0 OR c.id < ?)
		 ORDER BY c.id DESC LIMIT ?`, accountID, q.Before, q.Before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list credits: %w", err)
	}
	defer rows.Close()
	var out []CreditTx
	for rows.Next() {
		t, err := scanCredit(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list credits: scan: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list credits: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// CreateAccount creates the account called name, with an opening credit
// when credits is set (as Credit, with its audit entry), in one
// transaction. A taken name is ErrConflict; a bad name or credit
// ErrInvalid.
func (s *Policy) CreateAccount(ctx context.Context, name string, credits *CreditRequest) (Account, error) {
	if err := checkName("account name", name); err != nil {
		return Account{}, err
	}
	var micros int64
	if credits != nil {
		var err error
		if micros, err = credits.check(); err != nil {
			return Account{}, fmt.Errorf("create account: %w", err)
		}
		if micros < 0 {
			return Account{}, fmt.Errorf("create account: credits: %w: an opening credit must be positive", ErrInvalid)
		}
	}
	var a Account
	err := s.db.WriteTx(ctx, "create account", func(tx Conn) error {
		var err error
		a, err = scanAccount(tx.QueryRow(ctx,
			`INSERT INTO accounts (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING RETURNING `+accountColumns,
			name, Millis(s.now())))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("create account %q: %w: it exists", name, ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("create account: insert: %w", err)
		}
		if err := s.recordAudit(ctx, tx, AuditAccountCreate, a.Name, nil, accountView(a)); err != nil {
			return err
		}
		if credits == nil {
			return nil
		}
		r, err := s.credit(ctx, tx, a, micros, *credits, 0)
		a = r.Account
		return err
	})
	if err != nil {
		return Account{}, err
	}
	return a, nil
}

// AccountQuery pages the accounts in name order.
type AccountQuery struct {
	// After, when not empty, starts the page after the account of this
	// name (the last of the previous page).
	After string
	// Limit is the page's size, 1 to 500 (100 when 0).
	Limit int
}

// ListAccounts returns a page of the accounts, in name order, and whether
// there are more.
func (s *Policy) ListAccounts(ctx context.Context, q AccountQuery) ([]Account, bool, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, false, fmt.Errorf("list accounts: %w", err)
	}
	rows, err := s.db.Readers().Query(ctx,
		`SELECT `+accountColumns+` FROM accounts WHERE name > ? ORDER BY name LIMIT ?`, q.After, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list accounts: %w", err)
	}
	defer rows.Close()
	var out []Account
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list accounts: scan: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list accounts: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}
