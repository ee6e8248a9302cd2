package billing

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/money"
)

// NoCap marks an absent spend cap in Budget and Claim.
const NoCap = -1

// Budget is what an account may spend, in micro-dollars.
type Budget struct {
	// Credits is every credit ever added to the account (its balance plus
	// its total used): only adding credits changes it, charges never do.
	Credits int64
	// DailyCap and MonthlyCap cap the account's spend per UTC calendar day
	// and month, or are NoCap.
	DailyCap, MonthlyCap int64
	// Leased is set when Credits covers only the part of the balance this
	// instance may spend (several instances share the account); a refusal
	// then does not call it the account's balance.
	Leased bool
	// Short is set by a LeasingLedger whose grant could not give what was
	// asked: the balance less what every instance holds does not cover
	// it. Only then does a refused call stay refused (see Admit).
	Short bool
}

// Spend is what an account, and one of its keys, has been charged, in
// micro-dollars: every recorded charge, committed to the database or still
// queued for it. The periods are the UTC day and month of the time asked.
type Spend struct {
	Total                    int64 // the account's charges, ever
	AccountDay, AccountMonth int64 // the account's charges in the day and month
	KeyDay, KeyMonth         int64 // the key's charges in the day and month
}

// Ledger is what Admission reads; the server adapts *sqlite.Store to it.
type Ledger interface {
	// Budget reads the account's credits and caps from the database.
	Budget(ctx context.Context, accountID int64) (Budget, error)
	// Spend returns the charges of the account and key (none when keyID is
	// "") as of now's UTC day and month. It must count a charge from the
	// moment it is recorded (before it is committed) until it is dropped,
	// never twice and never not at all, and should not read the database
	// on every call.
	Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (Spend, error)
}

// LeasingLedger is a Ledger whose budget is leased from a database that
// several processes share (PostgreSQL): reading the budget may take a
// larger slice of the account's balance, so Admission says what it holds
// for calls in progress (reserved) and what the call that made it read
// asks for (need), both in micro-dollars.
type LeasingLedger interface {
	Ledger
	LeaseBudget(ctx context.Context, accountID int64, reserved, need int64) (Budget, error)
}

// Claim is a call asking to be admitted.
type Claim struct {
	AccountID int64
	KeyID     string // "" for none
	// KeyDailyCap and KeyMonthlyCap cap the key's own spend, or are NoCap.
	// Keys are read on every request, so they come with the claim rather
	// than from the Ledger.
	KeyDailyCap, KeyMonthlyCap int64
	// Amount is the call's cost ceiling in micro-dollars (Prices.Ceiling):
	// what is reserved while it runs.
	Amount int64
	// Now places the call in its UTC day and month.
	Now time.Time
}

// DefaultRefresh is how old a cached account budget may be when
// AdmissionOptions leaves Refresh zero.
const DefaultRefresh = time.Second

// AdmissionOptions configures an Admission.
type AdmissionOptions struct {
	// Refresh is the longest a cached account budget (credits and caps) is
	// used before it is read again; 0 means DefaultRefresh. Credits and
	// caps changed by another process (the CLI) are seen within it, and at
	// once by a call that would otherwise be refused.
	Refresh time.Duration
	// Clock measures the age of cached budgets; nil means time.Now. It is
	// not the clock that places calls in days and months (Claim.Now).
	Clock func() time.Time
}

// Admission admits calls against prepaid balances and spend caps, holding
// each admitted call's cost ceiling (its reservation) until the call is
// settled. It is safe for concurrent use.
//
// A call is admitted when, atomically per account:
//
//	credits − charges − reserved           ≥ ceiling  (and > 0)    else 402, no Retry-After
//	month's charges + reserved + ceiling   ≤ monthly cap            else 402, Retry-After to the 1st, 00:00 UTC
//	day's charges + reserved + ceiling     ≤ daily cap              else 402, Retry-After to 00:00 UTC
//
// for the account's caps and then the key's (with the key's own charges and
// reservations). Charges are the Ledger's Spend: committed and queued.
// Credits minus charges is the balance, queued debits included; credits
// alone come from the database, cached for at most Refresh, and a call that
// would be refused first makes Admission read them again, so a refusal never
// rests on a stale budget.
//
// Settling a call is: record its generation (which makes the Ledger count
// its actual cost), then Release its reservation. In between the cost is
// counted twice, which only errs toward refusing; it is never counted zero
// times. A call that fails only Releases.
//
// Overdraft bound: each admission sees every charge and every reservation,
// so the balance goes below zero only by the amount by which calls' actual
// costs exceed their reservations. Calls whose actual usage stays within
// what was reserved (input within the estimate, output within the reserved
// output tokens) cannot overdraw, however many run at once. The same bound
// holds for caps.
type Admission struct {
	ledger  Ledger
	refresh time.Duration
	clock   func() time.Time

	mu       sync.Mutex
	accounts map[int64]*admAccount // one per account seen; never evicted
}

// admAccount is the admission state of one account.
type admAccount struct {
	id int64
	// loadMu serialises budget reads, so callers that all find the budget
	// stale or all get refused share one read.
	loadMu sync.Mutex

	mu       sync.Mutex
	budget   Budget
	readAt   time.Time // when the read of budget began (Admission.clock); zero: never
	reserved int64
	keys     map[string]int64 // reserved per key; no zero entries
	// waiting is what the calls refused on a leased budget, and waiting
	// for a read to tell whether the money is there, ask in all: a read
	// asks for all of them at once (see admitLeased).
	waiting int64
}

// NewAdmission returns an Admission reading budgets and spend from l.
func NewAdmission(l Ledger, opts AdmissionOptions) *Admission {
	a := &Admission{ledger: l, refresh: opts.Refresh, clock: opts.Clock, accounts: make(map[int64]*admAccount)}
	if a.refresh <= 0 {
		a.refresh = DefaultRefresh
	}
	if a.clock == nil {
		a.clock = time.Now
	}
	return a
}

// Reservation is an admitted call's hold on its account's budget. Release it
// once, after the call's generation is recorded (or when the call failed).
type Reservation struct {
	acct     *admAccount
	keyID    string
	amount   int64
	released bool // guarded by acct.mu
}

// Amount is the reserved cost ceiling in micro-dollars.
func (r *Reservation) Amount() int64 { return r.amount }

// Release gives the reservation back. It is idempotent and safe on nil.
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	a := r.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	a.reserved -= r.amount
	if r.keyID != "" {
		if n := a.keys[r.keyID] - r.amount; n != 0 {
			a.keys[r.keyID] = n
		} else {
			delete(a.keys, r.keyID)
		}
	}
}

// Admit reserves c.Amount for the call, or refuses it with a
// payment_required *llm.Error saying which limit it met. Other errors come
// from the Ledger.
func (a *Admission) Admit(ctx context.Context, c Claim) (*Reservation, error) {
	started := a.clock()
	acct := a.account(c.AccountID)
	if err := a.load(ctx, acct, started.Add(-a.refresh), c.Amount, false); err != nil {
		return nil, err
	}
	res, refusal, err := a.try(ctx, acct, c)
	if refusal == nil || err != nil {
		return res, err
	}
	if _, leasing := a.ledger.(LeasingLedger); leasing {
		return a.admitLeased(ctx, acct, c)
	}
	// Credits may have been added, or a cap raised, by another process
	// since the budget was read: read it again (unless a read began after
	// this call arrived) before refusing.
	if err := a.load(ctx, acct, started, c.Amount, true); err != nil {
		return nil, err
	}
	res, refusal, err = a.try(ctx, acct, c)
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	return res, nil
}

// maxLeaseRounds bounds the reads a call refused on a leased budget makes
// (see admitLeased).
const maxLeaseRounds = 8

// admitLeased admits c, refused by this instance's lease, once the lease
// has room, or refuses it when the money is really gone. A lease is this
// instance's slice of the balance: its being spent says nothing of the
// balance. So the call waits for a read that began after it was refused,
// which asks the LeasingLedger for what every call waiting so asks (the
// calls of a burst share one read), and tries again; it stays refused only
// when that read came back Short: the balance, less what every instance
// holds, did not cover what was asked. When the read gave enough and other
// calls took it first, it reads again, at most maxLeaseRounds times.
func (a *Admission) admitLeased(ctx context.Context, acct *admAccount, c Claim) (*Reservation, error) {
	acct.mu.Lock()
	acct.waiting += c.Amount
	acct.mu.Unlock()
	defer func() {
		acct.mu.Lock()
		acct.waiting -= c.Amount
		acct.mu.Unlock()
	}()
	for round := 1; ; round++ {
		short, err := a.readAfter(ctx, acct, a.clock())
		if err != nil {
			return nil, err
		}
		res, refusal, err := a.try(ctx, acct, c)
		if err != nil {
			return nil, err
		}
		if refusal == nil {
			return res, nil
		}
		if short || round == maxLeaseRounds {
			return nil, refusal
		}
	}
}

// readAfter makes sure acct's budget was read by a read that began after
// since, sharing one among the callers, and returns whether that read
// came back Short.
func (a *Admission) readAfter(ctx context.Context, acct *admAccount, since time.Time) (bool, error) {
	acct.loadMu.Lock()
	defer acct.loadMu.Unlock()
	acct.mu.Lock()
	fresh, short := !acct.readAt.IsZero() && acct.readAt.After(since), acct.budget.Short
	acct.mu.Unlock()
	if fresh {
		return short, nil
	}
	if err := a.read(ctx, acct, 0); err != nil {
		return false, err
	}
	acct.mu.Lock()
	defer acct.mu.Unlock()
	return acct.budget.Short, nil
}

// Hold runs fn with what the account's admitted calls hold in
// reservations, under the account's lock: no call of the account is
// admitted or released meanwhile. A leasing Ledger gives back the part of
// its lease nothing holds with it.
func (a *Admission) Hold(accountID int64, fn func(reserved int64)) {
	acct := a.account(accountID)
	acct.mu.Lock()
	defer acct.mu.Unlock()
	fn(acct.reserved)
}

func (a *Admission) account(id int64) *admAccount {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct := a.accounts[id]
	if acct == nil {
		acct = &admAccount{id: id, keys: make(map[string]int64)}
		a.accounts[id] = acct
	}
	return acct
}

// load makes sure acct's budget was read by a read that began after since,
// for a call asking need; refusing says the call would otherwise be
// refused.
func (a *Admission) load(ctx context.Context, acct *admAccount, since time.Time, need int64, refusing bool) error {
	fresh := func() (ok, read bool) {
		acct.mu.Lock()
		defer acct.mu.Unlock()
		return !acct.readAt.IsZero() && acct.readAt.After(since), !acct.readAt.IsZero()
	}
	ok, read := fresh()
	if ok {
		return nil
	}
	// A leased budget only tops the lease up (the lease bounds what is
	// admitted, stale or not): a periodic refresh runs beside the calls
	// instead of making them wait for the database; only a call that
	// would be refused waits for its read.
	if _, leasing := a.ledger.(LeasingLedger); leasing && read && !refusing {
		if acct.loadMu.TryLock() {
			go func() {
				defer acct.loadMu.Unlock()
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*a.refresh+5*time.Second)
				defer cancel()
				_ = a.read(ctx, acct, need) // a failure shows in the lease lapsing, and the next refusal reads again
			}()
		}
		return nil
	}
	acct.loadMu.Lock()
	defer acct.loadMu.Unlock()
	if ok, _ := fresh(); ok {
		return nil // another caller read it meanwhile
	}
	return a.read(ctx, acct, need)
}

// read reads acct's budget (a leasing ledger tops its lease up for a call
// asking need). Callers hold acct.loadMu.
func (a *Admission) read(ctx context.Context, acct *admAccount, need int64) error {
	began := a.clock()
	var (
		b   Budget
		err error
	)
	if ll, ok := a.ledger.(LeasingLedger); ok {
		acct.mu.Lock()
		reserved := acct.reserved
		need = max(need, acct.waiting)
		acct.mu.Unlock()
		b, err = ll.LeaseBudget(ctx, acct.id, reserved, need)
	} else {
		b, err = a.ledger.Budget(ctx, acct.id)
	}
	if err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	acct.mu.Lock()
	acct.budget, acct.readAt = b, began
	acct.mu.Unlock()
	return nil
}

// try checks c against the account's budget, spend and reservations, and
// reserves c.Amount if it fits, all under the account's lock: a settling
// call records its charge before it releases (under this lock), so a check
// sees each settled cost at least once.
func (a *Admission) try(ctx context.Context, acct *admAccount, c Claim) (*Reservation, *llm.Error, error) {
	acct.mu.Lock()
	defer acct.mu.Unlock()
	sp, err := a.ledger.Spend(ctx, c.AccountID, c.KeyID, c.Now)
	if err != nil {
		return nil, nil, fmt.Errorf("admission: %w", err)
	}
	b := acct.budget
	keyReserved := acct.keys[c.KeyID]
	if c.KeyID == "" {
		keyReserved = 0
	}
	if refusal := check(b, sp, acct.reserved, keyReserved, c); refusal != nil {
		return nil, refusal, nil
	}
	acct.reserved += c.Amount
	if c.KeyID != "" && c.Amount != 0 {
		acct.keys[c.KeyID] += c.Amount
	}
	return &Reservation{acct: acct, keyID: c.KeyID, amount: c.Amount}, nil, nil
}

// check returns the refusal of c, or nil. Monthly caps come before daily
// ones: when both are met, the month is what the caller must wait for.
func check(b Budget, sp Spend, reserved, keyReserved int64, c Claim) *llm.Error {
	balance := b.Credits - sp.Total
	if avail := balance - reserved; avail <= 0 || avail < c.Amount {
		return balanceRefusal(balance, reserved, c.Amount, b.Leased)
	}
	caps := [...]struct {
		limit, spent, reserved int64
		whose                  string
		monthly                bool
	}{
		{b.MonthlyCap, sp.AccountMonth, reserved, "the account's", true},
		{c.KeyMonthlyCap, sp.KeyMonth, keyReserved, "this key's", true},
		{b.DailyCap, sp.AccountDay, reserved, "the account's", false},
		{c.KeyDailyCap, sp.KeyDay, keyReserved, "this key's", false},
	}
	for _, cp := range caps {
		if cp.limit < 0 || cp.spent+cp.reserved+c.Amount <= cp.limit {
			continue
		}
		return capRefusal(cp.whose, cp.monthly, cp.limit, cp.spent+cp.reserved, c.Amount, c.Now)
	}
	return nil
}

func balanceRefusal(balance, reserved, amount int64, leased bool) *llm.Error {
	var b strings.Builder
	if leased {
		// Other gateway instances hold the rest of the balance for their
		// own calls; what they do not need comes back within seconds.
		fmt.Fprintf(&b, "insufficient credits: %s USD of the account balance is available to this call now (calls in progress elsewhere hold the rest)", money.Micros(balance))
	} else {
		fmt.Fprintf(&b, "insufficient credits: the account balance is %s USD", money.Micros(balance))
	}
	if reserved > 0 {
		fmt.Fprintf(&b, ", of which %s USD is held by calls in progress,", money.Micros(reserved))
	}
	fmt.Fprintf(&b, " and this call may cost up to %s USD; add credits to continue", money.Micros(amount))
	return &llm.Error{Kind: llm.KindPaymentRequired, Message: b.String()}
}

func capRefusal(whose string, monthly bool, limit, used, amount int64, now time.Time) *llm.Error {
	now = now.UTC()
	period, span := "daily", "today (UTC)"
	reset := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if monthly {
		period, span = "monthly", "this month (UTC)"
		reset = time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	msg := fmt.Sprintf("spend cap reached: %s %s cap is %s USD, %s USD of it is spent or held by calls in progress %s, and this call may cost up to %s USD; the cap resets at %s",
		whose, period, money.Micros(limit), money.Micros(used), span, money.Micros(amount), reset.Format(time.RFC3339))
	if used < limit {
		msg += " (a lower max_tokens reserves less)"
	}
	return &llm.Error{Kind: llm.KindPaymentRequired, Message: msg, RetryAfter: reset.Sub(now)}
}
