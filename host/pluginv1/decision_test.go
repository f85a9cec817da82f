package pluginv1

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/policy"
	pb "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
)

// A real provider gets every ActionContext field the host has a source
// for — caller's actor, run context, grant, policy record and digest,
// budget, residency — and a terminal cost over its budget fails the call
// (and is charged all the same).
func TestActionContextAndCostOverBudget(t *testing.T) {
	f := newHostFixture(t)
	pol, err := policy.Parse([]byte("version: v1\ndefault: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	ledger := f.b.Ledger()
	h := newTestHost(t, f, func(o *host.Options) {
		o.Policy, o.Ledger = pol, ledger
		o.Decision = host.DecisionConfig{RunBudget: broker.Limits{Calls: 10, CostMicros: 500}, Residency: []string{"eu"}}
	})
	inst := f.install(t, badBin, "context")
	if err := AddProvider(h, inst); err != nil {
		t.Fatal(err)
	}
	g := &broker.AccessGrant{ID: broker.NewAccessGrantID(), Principal: "alice", Plugins: []string{inst.Name},
		IssuedBy: "ops", IssuedAt: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	if err := ledger.PutAccessGrant(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	run := host.RunContext{RunID: "run-3", ChangeID: "chg-3", PlanDigest: "sha256:" + strings.Repeat("ab", 32)}
	out, err := h.Invoke(context.Background(), inst.Name, host.InvokeRequest{Method: listTickets,
		Input: &ticketsv1.ListTicketsRequest{}, Deadline: time.Now().Add(30 * time.Second),
		Caller: host.Principal{ID: "alice", Method: "token"}, Actor: host.Actor{Kind: "user", Principal: "u-1"}, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != host.CallFailed || !strings.Contains(out.Reason, "cost: the provider reported 501 micros, more than the 500") {
		t.Fatalf("outcome %+v", out)
	}
	if len(out.Diagnostics) != 1 || out.Diagnostics[0].Code != "ctx" {
		t.Fatalf("diagnostics %+v", out.Diagnostics)
	}
	var ac pb.ActionContext
	if err := protojson.Unmarshal([]byte(out.Diagnostics[0].Message), &ac); err != nil {
		t.Fatal(err)
	}
	if ac.GetInvocationId() != out.InvocationID || ac.GetIdempotencyKey() != out.InvocationID ||
		ac.GetActor().GetKind() != "user" || ac.GetActor().GetPrincipal() != "u-1" ||
		ac.GetRunId() != run.RunID || ac.GetChangeId() != run.ChangeID || ac.GetPlanDigest() != run.PlanDigest ||
		ac.GetGrantId() != g.ID || ac.GetPolicyDecisionId() == "" || ac.GetProfileDigest() != pol.Digest() ||
		ac.GetBudget().GetMaxCalls() != 10 || ac.GetBudget().GetMaxCostMicros() != 500 || ac.GetResidency() != "eu" ||
		ac.GetDeadline() == nil || ac.GetDryRun() {
		t.Fatalf("ActionContext %v", &ac)
	}
	spent, err := ledger.Spent(context.Background(), broker.BudgetKeyRun("run-3"))
	if err != nil || spent.CostMicros != 501 || spent.Calls != 1 {
		t.Fatalf("run spent %+v %v", spent, err)
	}
}
