package e2e

import (
	"os"
	"testing"

	"github.com/herald-mq/herald/internal/testutil"
)

// TestOnThePostgreSQLStore runs the suite's tests of consume mode, watch mode, the
// queue REST API (TestAcceptance), the RPC, authentication and authorization again,
// with every server on the PostgreSQL store (--store postgres://…, a schema per data
// directory): the surfaces must not tell the stores apart. It skips only where
// PostgreSQL is not installed, and when HERALD_E2E_STORE already chose the store for
// the whole run.
func TestOnThePostgreSQLStore(t *testing.T) {
	if s := os.Getenv("HERALD_E2E_STORE"); s != "" {
		t.Skipf("HERALD_E2E_STORE=%s chose the store of the whole run", s)
	}
	testutil.PostgresDSN(t)
	t.Setenv("HERALD_E2E_STORE", "postgres")
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Acceptance", TestAcceptance},
		{"KillNine", TestKillNine},
		{"SeedBasicConsumeWorkflow", TestSeedBasicConsumeWorkflow},
		{"SeedErrorHandlingPattern", TestSeedErrorHandlingPattern},
		{"SeedCompetingConsumers", TestSeedCompetingConsumers},
		{"LeavingConsumersKeepTheBudget", TestLeavingConsumersKeepTheBudget},
		{"SettlementInTransaction", TestSettlementInTransaction},
		{"GroupSharesOneAtATime", TestGroupSharesOneAtATime},
		{"GroupParamsArePartOfIt", TestGroupParamsArePartOfIt},
		{"GroupRedeployChangesOptions", TestGroupRedeployChangesOptions},
		{"WatchModeAcceptance", TestWatchModeAcceptance},
		{"WatchReliableResumeAfterKillNine", TestWatchReliableResumeAfterKillNine},
		{"WatchSeedDashboard", TestWatchSeedDashboard},
		{"WatchSeedInbox", TestWatchSeedInbox},
		{"GRPCHealthAndUnknownMethods", TestGRPCHealthAndUnknownMethods},
		{"Grpcurl", TestGrpcurl},
		{"AuthLoopback", TestAuthLoopback},
		{"SessionsBelongToTheirPrincipal", TestSessionsBelongToTheirPrincipal},
		{"PermissionsOnEverySurface", TestPermissionsOnEverySurface},
		{"AuthorizationMatrix", TestAuthorizationMatrix},
		{"ConsumeGroupsBelongToTheirPrincipal", TestConsumeGroupsBelongToTheirPrincipal},
		{"DenyWatchCoversReferences", TestDenyWatchCoversReferences},
	} {
		t.Run(tc.name, tc.run)
	}
}
