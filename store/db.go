package store

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// DB is svcgw's database, whichever engine holds it: *Store, SQLite in one
// file (the embedded default, for one svcgw serve), or *Postgres, a
// PostgreSQL server that several svcgw serve instances share. The two
// behave the same to their callers (one test suite runs against both);
// what differs is said on the methods. The server, the CLI and the account
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
	UsageByDay(ctx context.Context, accountID int64, q UsageQuery) ([]DayBucket, error)
	UpsertFeedback(ctx context.Context, accountID int64, f Feedback, maxAge time.Duration) (created bool, err error)
	PrunedBefore(ctx context.Context) (time.Time, error)
	OutputItems(ctx context.Context, accountID int64, ids []string) (map[string][]byte, error)

	// Admission is what the server admits calls against (billing's
	// Ledger): the Store itself on SQLite; the instance's balance leases
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

var (
	_ DB = (*Store)(nil)
	_ DB = (*Postgres)(nil)
)

// IsPostgres reports whether dsn names a PostgreSQL database: a URL with
// the postgres:// or postgresql:// scheme. Anything else is a SQLite file.
func IsPostgres(dsn string) bool {
	scheme, _, ok := strings.Cut(dsn, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// Dial opens the database dsn names: OpenPostgres for a postgres:// or
// postgresql:// URL, else Open for a SQLite file path. Both create the
// schema, or bring it up to date, first.
func Dial(ctx context.Context, dsn string, opts Options) (DB, error) {
	if IsPostgres(dsn) {
		return OpenPostgres(ctx, dsn, opts)
	}
	return Open(ctx, dsn, opts)
}

// Redact returns dsn with any password replaced by "xxxxx", for logs and
// messages.
func Redact(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
