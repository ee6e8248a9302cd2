package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// DB is svcgw's database, whichever engine holds it: *sqlite.Store, SQLite
// in one file (the embedded default, for one svcgw serve), or
// *postgres.Store, a PostgreSQL server that several svcgw serve instances
// share. The engines behave the same to their callers (each passes the
// conformance suite, store/storetest); what differs is said on the
// methods. The server, the CLI and the account
// endpoints use only this interface.
type DB interface {
	// Accounts.
	EnsureAccount(ctx context.Context, name string) (acct Account, created bool, err error)
	AccountByName(ctx context.Context, name string) (Account, error)
	AccountByID(ctx context.Context, id int64) (Account, error)
	CountAccounts(ctx context.Context) (int, error)
	AddCredits(ctx context.Context, accountID int64, amount apd.Decimal, note string) (Account, error)
	UpdateAccountCaps(ctx context.Context, accountID int64, update func(*Caps)) (Account, error)
	Budget(ctx context.Context, accountID int64) (Budget, error)
	CreateAccount(ctx context.Context, name string, credits *CreditRequest) (Account, error)
	ListAccounts(ctx context.Context, q AccountQuery) ([]Account, bool, error)
	Credit(ctx context.Context, accountID int64, req CreditRequest) (CreditResult, error)
	ListCredits(ctx context.Context, accountID int64, q CreditQuery) ([]CreditTx, bool, error)

	// API keys.
	CreateKey(ctx context.Context, accountID int64, name string) (secret string, k Key, err error)
	ListKeys(ctx context.Context, accountID int64) ([]Key, error)
	RevokeKey(ctx context.Context, keyID string) (Key, error)
	Authenticate(ctx context.Context, secret string) (Key, error)
	UpdateKeyLimits(ctx context.Context, keyID string, update func(*KeyLimits)) (Key, error)
	IssueKey(ctx context.Context, accountID int64, name string, l KeyLimits) (secret string, k Key, err error)

	// Admin tokens and the audit log of every change (see WithActor).
	CreateAdminToken(ctx context.Context, name string, readOnly bool) (secret string, t AdminToken, err error)
	ListAdminTokens(ctx context.Context) ([]AdminToken, error)
	RevokeAdminToken(ctx context.Context, ref string) (AdminToken, error)
	AuthenticateAdmin(ctx context.Context, secret string) (AdminToken, error)
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, bool, error)

	// The ledger.
	RecordGeneration(g Generation)
	Sync(ctx context.Context) error
	SyncWithin(ctx context.Context, d time.Duration) error
	CheckLedger() error
	Generation(ctx context.Context, accountID int64, id string) (Generation, error)
	GenerationByID(ctx context.Context, id string) (Generation, error)
	ListGenerations(ctx context.Context, accountID int64, q ListQuery) ([]ListedGeneration, bool, error)
	Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (Spend, error)
	PeriodSpend(ctx context.Context, accountID int64, keyID string, now time.Time) (Spend, error)
	Usage(ctx context.Context, accountID int64, q UsageQuery) ([]Bucket, error)
	UsageTotal(ctx context.Context, accountID int64, q UsageQuery) (Bucket, error)
	UsageByDay(ctx context.Context, accountID int64, q UsageQuery) ([]DayBucket, error)
	UpsertFeedback(ctx context.Context, accountID int64, f Feedback, maxAge time.Duration) (created bool, err error)
	PrunedBefore(ctx context.Context) (time.Time, error)
	OutputItems(ctx context.Context, accountID int64, ids []string) (map[string][]byte, error)

	// Admission is what the server admits calls against (billing's
	// Ledger): the sqlite.Store itself; the instance's balance leases
	// on PostgreSQL, which also start its heartbeat.
	Admission() Admitter
	// Instances is how many svcgw serve instances share the database, 1
	// on SQLite: the rate limits are divided among them.
	Instances() int

	// For metrics: the ledger writer's state and the connection pools'.
	LedgerStats() LedgerStats
	Pools() []Pool

	// The rest.
	SealKeys(ctx context.Context) ([]SealKey, error)
	StartUpkeep(opts UpkeepOptions) error
	Health(ctx context.Context) Health
	Close() error
}

// An Engine registers itself with Register, in an init function of its
// package, and Dial then opens the DSNs it claims:
//
//	func init() { store.Register("postgres", IsDSN, dial) }
//
// A program links the engines it may open by importing their packages
// (blank where it needs nothing else of them).

// engines are the engines registered, in order.
var (
	enginesMu sync.RWMutex
	engines   []registered
)

type registered struct {
	name   string
	claims func(dsn string) bool
	open   func(ctx context.Context, dsn string, opts Options) (DB, error)
}

// Register makes open the way Dial opens every DSN claims reports true
// for. name names the engine in errors. It panics when name is registered
// twice, as database/sql.Register does.
func Register(name string, claims func(dsn string) bool, open func(ctx context.Context, dsn string, opts Options) (DB, error)) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	for _, e := range engines {
		if e.name == name {
			panic("store: engine " + name + " registered twice")
		}
	}
	engines = append(engines, registered{name, claims, open})
}

// Dial opens the database dsn names with the registered engine that claims
// it (store/sqlite: a file path; store/postgres: a postgres:// or
// postgresql:// URL), which creates the schema, or brings it up to date,
// first.
func Dial(ctx context.Context, dsn string, opts Options) (DB, error) {
	enginesMu.RLock()
	var open func(ctx context.Context, dsn string, opts Options) (DB, error)
	var names []string
	for _, e := range engines {
		names = append(names, e.name)
		if open == nil && e.claims(dsn) {
			open = e.open
		}
	}
	enginesMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("open %s: %w: no engine claims it (registered: %s)", Redact(dsn), ErrInvalid, strings.Join(names, ", "))
	}
	return open(ctx, dsn, opts)
}

// IsURL reports whether dsn is a URL (scheme://...) rather than a file
// path: the PostgreSQL engine claims postgres:// and postgresql:// URLs, the
// SQLite engine every DSN that is not a URL.
func IsURL(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	return ok && scheme != "" && !strings.ContainsAny(scheme, `/\`)
}

// Redact returns dsn with any password (the URL's user:password, a
// password or sslpassword parameter) replaced by "xxxxx", for logs and
// messages. A file path is returned as it is.
func Redact(dsn string) string {
	if !IsURL(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	// The URL's query may carry the password, and the TLS client key's
	// (sslpassword), as libpq and pgx read them.
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, k := range [...]string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Admitter is what the server's admission reads: an account's budget and
// what its calls have been charged (billing.Ledger). On SQLite it is the
// sqlite.Store itself; on PostgreSQL it is the instance's balance leases, and it
// also implements LeaseBudget (billing.LeasingLedger).
type Admitter interface {
	Budget(ctx context.Context, accountID int64) (Budget, error)
	Spend(ctx context.Context, accountID int64, keyID string, now time.Time) (Spend, error)
}
