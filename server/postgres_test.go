package server

import (
	"context"
	"os"
	"testing"

	"github.com/svcgw/svcgw/internal/pgtest"
	"github.com/svcgw/svcgw/store"
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
	}
	pgtest.DSN(t) // skip here, once, without PostgreSQL
	sqlite := openGatewayStore
	openGatewayStore = func(ctx context.Context, t *testing.T) (store.DB, error) {
		return store.OpenPostgres(ctx, pgtest.DSN(t), store.Options{})
	}
	t.Cleanup(func() { openGatewayStore = sqlite })
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}
