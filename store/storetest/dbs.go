// Package storetest is the conformance suite of svcgw's store engines:
// every behaviour of store.DB, run against one engine. Each engine's
// package runs it from its tests,
//
//	func TestConformance(t *testing.T) { storetest.Run(t, newOpener) }
//
// so a new engine is one package that implements store.Engine, registers
// itself with store.Register and passes this suite. The helpers the
// suite's tests share (a test clock, generations, accounts, the ledger's
// invariants) are exported for the engines' own tests.
package storetest

import (
	"context"
	"testing"

	"github.com/svcgw/svcgw/store"
)

// Opener opens the test's database (the same one each time it is called
// within a test) with opts, filling in a seeded id source when opts has
// none, and closes it when the test ends.
type Opener func(t testing.TB, opts store.Options) store.DB

// Run runs every test of the suite as a subtest of t, each on a new, empty
// database of the engine: newOpener returns the opener of one for the
// subtest it is given (skipping it when the engine cannot run there).
func Run(t *testing.T, newOpener func(t *testing.T) Opener) {
	t.Helper()
	for _, c := range suite {
		t.Run(c.name, func(t *testing.T) { c.test(t, newOpener(t)) })
	}
}

// suite is every test of the suite, by name.
var suite = []struct {
	name string
	test func(t *testing.T, open Opener)
}{
	{"EnsureAccount", testEnsureAccount},
	{"AddCredits", testAddCredits},
	{"UpsertFeedback", testUpsertFeedback},
	{"UpsertFeedback_EndUsersPerGenerationAreBounded", testUpsertFeedback_EndUsersPerGenerationAreBounded},
	{"UpsertFeedback_MaxAge", testUpsertFeedback_MaxAge},
	{"ListGenerations_NewestFirstPagedByID", testListGenerations_NewestFirstPagedByID},
	{"ListGenerations_Filters", testListGenerations_Filters},
	{"ListGenerations_FeedbackSummary", testListGenerations_FeedbackSummary},
	{"ListGenerations_FiltersMatchBruteForce", testListGenerations_FiltersMatchBruteForce},
	{"Open_NewDatabaseSaysNothingOfMigrating", testOpen_NewDatabaseSaysNothingOfMigrating},
	{"Open_AnnouncesTheFilterIndexes", testOpen_AnnouncesTheFilterIndexes},
	{"OutputItems_KeptWithTheRecord", testOutputItems_KeptWithTheRecord},
	{"CreateKey", testCreateKey},
	{"Authenticate", testAuthenticate},
	{"ListKeys", testListKeys},
	{"Authenticate_CacheSeesOtherProcessesWithinTTL", testAuthenticate_CacheSeesOtherProcessesWithinTTL},
	{"RecordGeneration_SyncReadsYourWrites", testRecordGeneration_SyncReadsYourWrites},
	{"Generation_NotFound", testGeneration_NotFound},
	{"RecordGeneration_DropsBadRowsOnly", testRecordGeneration_DropsBadRowsOnly},
	{"RecordGeneration_ReferencesCreatedLater", testRecordGeneration_ReferencesCreatedLater},
	{"Close_FlushesQueue", testClose_FlushesQueue},
	{"Ledger_ConcurrentReadersAndWriters", testLedger_ConcurrentReadersAndWriters},
	{"SyncWithin_WaitsForTheWritersOwnCommit", testSyncWithin_WaitsForTheWritersOwnCommit},
	{"Rollups_EqualGenerations", testRollups_EqualGenerations},
	{"Store_SealKeys", testStore_SealKeys},
	{"Spend_DaysAndMonths", testSpend_DaysAndMonths},
	{"Budget", testBudget},
	{"UpdateAccountCaps", testUpdateAccountCaps},
	{"AccountRateLimits", testAccountRateLimits},
	{"UpdateKeyLimits", testUpdateKeyLimits},
	{"Pools_NameEachPool", testPools_NameEachPool},
	{"LedgerStats_CountsCommitsOnEitherStore", testLedgerStats_CountsCommitsOnEitherStore},
	{"UsageByDay", testUsageByDay},
	{"Usage", testUsage},
	{"AdminTokens", testAdminTokens},
	{"Audit_EveryChange", testAudit_EveryChange},
	{"KeyExpiry", testKeyExpiry},
	{"Credit", testCredit},
	{"Credit_ConcurrentRetries", testCredit_ConcurrentRetries},
	{"ListAccounts", testListAccounts},
}

// newTestDB opens a fresh database with a test clock.
func newTestDB(t testing.TB, open Opener) (store.DB, *Clock) {
	t.Helper()
	clock := NewClock()
	return open(t, store.Options{Now: clock.Now}), clock
}

// EngineSQL picks the query text of db's engine (by its dialect's name),
// for the few checks whose SQL differs between engines.
func EngineSQL(t testing.TB, db store.DB, sqlite, postgres string) string {
	t.Helper()
	switch name := engine(t, db).Dialect().Name; name {
	case "sqlite":
		return sqlite
	case "postgres":
		return postgres
	default:
		t.Fatalf("the suite has no SQL of engine %q for this check", name)
		return ""
	}
}

// engine is db as the engine contract, which every engine's DB is.
func engine(t testing.TB, db store.DB) store.Engine {
	t.Helper()
	e, ok := db.(store.Engine)
	if !ok {
		t.Fatalf("%T is not a store.Engine", db)
	}
	return e
}

// Query runs a read on db's reader pool, with ? placeholders on any
// engine, and calls scan for each row.
func Query(t testing.TB, db store.DB, q string, args []any, scan func(store.Scanner) error) {
	t.Helper()
	rows, err := engine(t, db).Readers().Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatalf("query %s: scan: %v", q, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
}

// QueryInt runs a query of one integer.
func QueryInt(t testing.TB, db store.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	Query(t, db, q, args, func(r store.Scanner) error { return r.Scan(&n) })
	return n
}

// Exec runs a write in a write transaction of db, with ? placeholders on
// any engine.
func Exec(t testing.TB, db store.DB, q string, args ...any) {
	t.Helper()
	err := engine(t, db).WriteTx(context.Background(), "exec", func(tx store.Conn) error {
		_, err := tx.Exec(context.Background(), q, args...)
		return err
	})
	if err != nil {
		t.Fatalf("exec %s: %v", q, err)
	}
}
