package broker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// A call is checked against the grants in the ledger: the narrowest
// covering grant is chosen, and the call is charged on its budget line
// (with the run's) before it runs.
func ExampleSelectGrant() {
	ctx := context.Background()
	var l broker.Ledger = broker.NewMemoryStore(1000, time.Minute, time.Hour, nil)
	now := time.Now()
	_ = l.PutAccessGrant(ctx, &broker.AccessGrant{ID: "g_any", RiskCeiling: "read", Actor: "user:alice",
		IssuedBy: "root", IssuedAt: now, NotAfter: now.Add(time.Hour)})
	_ = l.PutAccessGrant(ctx, &broker.AccessGrant{ID: "g_tickets", Actor: "user:alice", Plugins: []string{"tickets"},
		Methods: []string{"tickets.v1.Tickets/Create"}, RiskCeiling: "write", Budget: broker.Limits{Calls: 2},
		IssuedBy: "root", IssuedAt: now, NotAfter: now.Add(time.Hour)})

	q := broker.GrantQuery{Principal: "support-agent", Actor: "user:alice", Plugin: "tickets",
		Method: "tickets.v1.Tickets/Create", Risk: "write", RunID: "run-1", Now: now}
	grants, _ := l.ListAccessGrants(ctx)
	g := broker.SelectGrant(grants, q)
	fmt.Println("grant:", g.ID)
	if ok, why := grants[0].Covers(q); !ok {
		fmt.Println(grants[0].ID, "does not cover it:", why)
	}

	lines := []broker.BudgetLine{g.BudgetLine(), {Key: broker.BudgetKeyRun(q.RunID), Limits: broker.Limits{Calls: 20}}}
	for i := 0; i < 3; i++ {
		var be *broker.BudgetExhaustedError
		if err := l.Charge(ctx, lines, broker.Spend{Calls: 1}); errors.As(err, &be) {
			fmt.Println("refused:", be.Key, be.Dimension)
		}
	}
	// Output:
	// grant: g_tickets
	// g_any does not cover it: risk_ceiling
	// refused: grant:g_tickets calls
}
