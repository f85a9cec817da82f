package api

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// The decision context goes into the handle's grant, over the broker API
// too, and a residency refusal keeps its identity across the socket.
func TestIssueDecisionContextOverAPI(t *testing.T) {
	ctx := context.Background()
	f := startAPI(t, nil)
	withRegions(f.mem)
	budget := []broker.BudgetLine{{Key: broker.BudgetKeyInvocation("inv"), Limits: broker.Limits{EgressRequests: 3}},
		{Key: broker.BudgetKeyRun("run-1"), Limits: broker.Limits{EgressBytes: 1 << 20, Calls: 20}}}
	iss, err := f.client.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "eu.api", Destinations: apiDest,
		Deadline: time.Now().Add(time.Minute), RunID: "run-1", AccessGrantID: "grant-7", Budget: budget,
		Residency: []string{"eu-west-1"}, OnViolation: broker.OnViolationEnd})
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.mem.b.Resolve(ctx, iss.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if g.RunID != "run-1" || g.AccessGrantID != "grant-7" || !slices.Equal(g.Budget, budget) ||
		!slices.Equal(g.Residency, []string{"eu-west-1"}) || g.OnViolation != broker.OnViolationEnd {
		t.Fatalf("grant %+v", g)
	}
	// Operators see it in an inspection.
	in, err := f.client.Inspect(ctx, iss.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	if ig := in.Grant; ig.RunID != "run-1" || ig.AccessGrantID != "grant-7" || !slices.Equal(ig.Budget, budget) ||
		!slices.Equal(ig.Residency, []string{"eu-west-1"}) || ig.OnViolation != broker.OnViolationEnd {
		t.Fatalf("inspected %+v", ig)
	}
	// The default reaction is refuse.
	iss, err = f.client.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "eu.api", Destinations: apiDest,
		Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := f.mem.b.Resolve(ctx, iss.Handle); g.OnViolation != broker.OnViolationRefuse || g.Budget != nil {
		t.Fatalf("default grant %+v", g)
	}
	_, err = f.client.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv", Intent: "eu.api", Destinations: apiDest,
		Deadline: time.Now().Add(time.Minute), Residency: []string{"us-east-1"}})
	if !errors.Is(err, broker.ErrResidencyViolation) {
		t.Fatalf("residency over the API: %v", err)
	}
	for name, req := range map[string]broker.IssueRequest{
		"on_violation": {OnViolation: "explode"},
		"budget key":   {Budget: []broker.BudgetLine{{Key: ""}}},
		"budget limit": {Budget: []broker.BudgetLine{{Key: "run:x", Limits: broker.Limits{EgressBytes: -1}}}},
		"budget twice": {Budget: []broker.BudgetLine{{Key: "run:x"}, {Key: "run:x"}}},
	} {
		req.PluginID, req.InvocationID, req.Intent, req.Destinations, req.Deadline = "p", "inv", "eu.api", apiDest, time.Now().Add(time.Minute)
		if _, err := f.client.Issue(ctx, req); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("%s: %v, want bad request", name, err)
		}
	}
}
