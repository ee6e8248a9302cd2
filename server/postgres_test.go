package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
	"github.com/svcgw/svcgw/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestPostgres_GatewayEndToEnd runs the gateway's end-to-end tests that
// go through the store (admission, caps, rate limits, charges, keys and
// the account endpoints) with the gateway on PostgreSQL, each on a fresh
// database: one behaviour, two stores. Without PostgreSQL it skips (fails
// under SVCGW_REQUIRE_POSTGRES=1).
func TestPostgres_GatewayEndToEnd(t *testing.T) {
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"ConcurrentCallsCannotOverdraw", TestAdmission_ConcurrentCallsCannotOverdraw},
		{"OverdraftIsBoundedByUnreservedOutput", TestAdmission_OverdraftIsBoundedByUnreservedOutput},
		{"FailedCallsCostNothing", TestAdmission_FailedCallsCostNothingAndReleaseTheirReservation},
		{"CapsAcrossBoundaries", TestCaps_DailyAndMonthlyAcrossBoundaries},
		{"RequestsPerMinute", TestRateLimit_RequestsPerMinute429OnEverySurface},
		{"TokensPerMinute", TestRateLimit_TokensPerMinutePerKey},
		{"AccountRequestsPerMinute", TestRateLimit_AccountRequestsPerMinuteAcrossItsKeys},
		{"AccountRefusalLeavesTheKeysRequests", TestRateLimit_AnAccountsRefusalLeavesTheKeysRequests},
		{"ChargeExact", TestCharge_ExactOnEveryUpstreamProtocol},
		{"AuthHeaders", TestAuth_TwoHeaderStyles},
		{"WaitWaitsForHandlers", TestServer_WaitWaitsForHandlersToRecord},
		{"ExactlyOnTheCap", TestCaps_ExactlyOnTheCap},
		{"PaymentRequired", TestPaymentRequired_WhenBalanceIsSpent},
		{"Unauthorized", TestAuth_401InTheSurfaceEnvelope},
		{"GenerationAndFeedback", TestChat_IDAcceptedByGenerationAndFeedback},
		{"UsageCreditsAndGenerations", TestChat_ScriptedSeriesMatchesUsageCreditsAndGenerations},
		{"StreamDisconnectIsMetered", TestChat_StreamDisconnectIsMetered},
		{"AbsurdUsageIsBounded", TestGateway_AbsurdUpstreamUsageIsBoundedAndCharged},
		{"UnreportedUsage", TestGateway_UnreportedUsageIsChargedAtTheEstimate},
		{"EmbeddingsOpenAI", TestEmbeddingsSDK_OpenAI},
		{"EmbeddingsGemini", TestEmbeddingsSDK_Gemini},
		{"EmbeddingsBilling", TestEmbeddings_Billing},
		{"AdminAPI", TestAdminAPI_EndToEnd},
		{"RefundAfterCalls", TestAdminAPI_ARefundOfAllThatIsLeftAfterCalls},
		{"AdminTokens", TestAdminAPI_TokensGuardEveryRoute},
		{"ExpiredKey", TestAuth_ExpiredKeyInEachSurfaceEnvelope},
	}
	pgtest.DSN(t) // skip here, once, without PostgreSQL
	sqlite := openGatewayStore
	openGatewayStore = func(ctx context.Context, t *testing.T) (store.DB, error) {
		return postgres.Open(ctx, pgtest.DSN(t), store.Options{})
	}
	t.Cleanup(func() { openGatewayStore = sqlite })
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// An instance on PostgreSQL whose database sessions end, and which cannot
// take its liveness lock again (a peer holds it), admits no call: /readyz
// is 503, with the cause on the admin listener and a word for callers,
// until it holds the lock again.
func TestPostgres_ReadyzNamesALostLivenessLock(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	st, err := postgres.Open(ctx, dsn, store.Options{})
	is.NoErr(err)
	gw := newTestGateway(t, withStore(st))
	admin := httptest.NewServer(gw.Server.Admin(AdminOptions{Reload: func(context.Context) error { return nil }, OpenMetrics: true}))
	t.Cleanup(admin.Close)
	resp, _ := gw.do(t, http.MethodGet, "/readyz", "")
	is.Equal(resp.StatusCode, http.StatusOK) // ready, its lock held

	peer, err := pgx.Connect(ctx, dsn) // the test's session, standing for a peer
	is.NoErr(err)
	defer peer.Close(ctx)
	var key int64
	is.NoErr(peer.QueryRow(ctx, `SELECT lock_key FROM instances`).Scan(&key))
	_, err = peer.Exec(ctx, `SET lock_timeout = '1s'`)
	is.NoErr(err)
	for try := 0; ; try++ { // again if the instance took its lock back first
		_, err = peer.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`, int64(uint64(key)>>32), int64(uint64(key)&0xffffffff))
		is.NoErr(err)
		if _, err = peer.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err == nil || try == 5 {
			break
		}
	}
	is.NoErr(err)

	var body []byte
	for began := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if resp, body = gw.do(t, http.MethodGet, "/readyz", ""); resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Since(began) > 5*time.Second {
			t.Fatal("still ready 5 s after the instance's sessions ended")
		}
	}
	is.Equal(strings.TrimSpace(string(body)), `{"status":"unavailable","leases":"unavailable"}`) // a word for callers
	aresp, err := http.Get(admin.URL + "/readyz")
	is.NoErr(err)
	defer aresp.Body.Close()
	is.Equal(aresp.StatusCode, http.StatusServiceUnavailable)
	var r struct{ Database, Ledger, Leases string }
	is.NoErr(json.NewDecoder(aresp.Body).Decode(&r))
	is.Equal(r.Database, "")
	is.Equal(r.Ledger, "")
	is.True(strings.Contains(r.Leases, "liveness lock is not held")) // the operator is told why

	_, err = peer.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
	is.NoErr(err)
	for began := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if resp, _ = gw.do(t, http.MethodGet, "/readyz", ""); resp.StatusCode == http.StatusOK {
			break
		}
		if time.Since(began) > 5*time.Second {
			t.Fatal("not ready 5 s after the lock came free")
		}
	}
}
