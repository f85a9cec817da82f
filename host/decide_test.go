package host

import (
	"context"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
)

const allowPolicy = "version: v1\ndefault: allow\n"

// Every ActionContext field the host has a source for reaches the
// runtime: caller, actor, run context, grant, policy record and digest,
// budget and residency; the handles' scope carries the same.
func TestCallCarriesTheDecision(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskWrite}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{
		RunBudget: broker.Limits{Calls: 5, CostMicros: 1000}, Residency: []string{"eu", "us"}}, rt)
	g := f.grant(t, broker.AccessGrant{Principal: "alice", Plugins: []string{"p"}, Budget: broker.Limits{Calls: 3},
		Residency: []string{"eu"}})
	run := RunContext{RunID: "run-1", ChangeID: "chg-1", PlanDigest: "sha256:" + "ab12"}
	out, err := f.invoke(context.Background(), alice, `{"project":"SUP"}`, func(r *InvokeRequest) {
		r.Run, r.Actor = run, Actor{Kind: "user", Principal: "u-7"}
	})
	if err != nil || out.Status != CallSucceeded {
		t.Fatalf("invoke: %v %+v", err, out)
	}
	c := rt.last()
	if c.Caller.ID != "alice" || c.Actor != (Actor{Kind: "user", Principal: "u-7"}) || c.Run != run {
		t.Fatalf("caller/actor/run: %+v %+v %+v", c.Caller, c.Actor, c.Run)
	}
	if c.GrantID != g.ID || c.ProfileDigest != f.opts.Policy.Digest() || c.ProfileDigest == "" || c.PolicyDecisionID == "" {
		t.Fatalf("grant %q digest %q decision %q", c.GrantID, c.ProfileDigest, c.PolicyDecisionID)
	}
	// The grant allows 3 calls, the run 5: 3 left (this one included).
	if c.Budget != (CallBudget{MaxCalls: 3, MaxCostMicros: 1000}) {
		t.Fatalf("budget %+v", c.Budget)
	}
	if len(c.Residency) != 1 || c.Residency[0] != "eu" {
		t.Fatalf("residency %v: the grant narrows the host's", c.Residency)
	}
	if c.Scope.AccessGrantID != g.ID || c.Scope.RunID != "run-1" || len(c.Scope.Budget) != 3 {
		t.Fatalf("scope %+v", c.Scope)
	}
	d := dataOf(t, f.records(t, "policy.decision")[0])
	if d["principal"] != "alice" || d["actor"] != "user:u-7" || d["run_id"] != "run-1" || d["grant_id"] != g.ID ||
		d["profile_digest"] != c.ProfileDigest || d["effect"] != "allow" {
		t.Fatalf("policy.decision %v", d)
	}
}

// With require_grant, a call no grant covers is refused and recorded; a
// grant for another principal does not cover it.
func TestGrantRequired(t *testing.T) {
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{RequireGrant: true}, &callRuntime{risk: policy.RiskRead})
	f.grant(t, broker.AccessGrant{Principal: "bob", Plugins: []string{"p"}})
	if _, err := f.invoke(context.Background(), alice, `{}`); !errors.Is(err, ErrGrantRequired) {
		t.Fatalf("alice without a grant: %v", err)
	}
	if _, err := f.invoke(context.Background(), bob, `{}`); err != nil {
		t.Fatalf("bob under his grant: %v", err)
	}
	gates := f.records(t, "gate.grant")
	if len(gates) != 2 || dataOf(t, gates[0])["covered"] != false || dataOf(t, gates[1])["covered"] != true {
		t.Fatalf("gate.grant records: %d", len(gates))
	}
}

// An exhausted budget refuses the next call and names which budget: the
// run's calls here, then a grant's cost once a call's reported cost
// spent it.
func TestBudgetExhaustedNamesTheBudget(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead, run: func(context.Context, Call) *Outcome {
		return &Outcome{Status: CallSucceeded, CostMicros: 600}
	}}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{RunBudget: broker.Limits{Calls: 2}}, rt)
	inRun := func(id string) func(*InvokeRequest) { return func(r *InvokeRequest) { r.Run.RunID = id } }
	for i := range 2 {
		if _, err := f.invoke(context.Background(), alice, `{}`, inRun("r1")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := f.invoke(context.Background(), alice, `{}`, inRun("r1"))
	var be *broker.BudgetExhaustedError
	if !errors.As(err, &be) || be.Key != broker.BudgetKeyRun("r1") || be.Dimension != "calls" {
		t.Fatalf("third call in run r1: %v", err)
	}
	// Another run has its own budget.
	if _, err := f.invoke(context.Background(), alice, `{}`, inRun("r2")); err != nil {
		t.Fatalf("run r2: %v", err)
	}
	g := f.grant(t, broker.AccessGrant{Principal: "bob", Plugins: []string{"p"}, Budget: broker.Limits{CostMicros: 1000}})
	for i, want := range []bool{true, true, false} { // 600, 1200 ≥ 1000: the third is refused
		_, err := f.invoke(context.Background(), bob, `{}`)
		if (err == nil) != want {
			t.Fatalf("bob call %d: %v", i, err)
		}
		if !want && (!errors.As(err, &be) || be.Key != broker.BudgetKeyGrant(g.ID) || be.Dimension != "cost_micros") {
			t.Fatalf("bob call %d: %v", i, err)
		}
	}
	if n := len(f.records(t, "gate.budget")); n != 2 {
		t.Fatalf("%d gate.budget records, want 2", n)
	}
}

// A call past the cost its budget allowed fails (the runtime's check),
// and what it reported is still charged.
func TestReportedCostIsCharged(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead, run: func(_ context.Context, c Call) *Outcome {
		return &Outcome{Status: CallSucceeded, CostMicros: c.Budget.MaxCostMicros / 2}
	}}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{RunBudget: broker.Limits{CostMicros: 800}}, rt)
	for range 2 {
		if _, err := f.invoke(context.Background(), alice, `{}`, func(r *InvokeRequest) { r.Run.RunID = "r" }); err != nil {
			t.Fatal(err)
		}
	}
	// 400 then 200 spent: 200 left.
	if c := rt.last(); c.Budget.MaxCostMicros != 400 {
		t.Fatalf("second call's budget: %+v", c.Budget)
	}
	s, _ := f.ledger.Spent(context.Background(), broker.BudgetKeyRun("r"))
	if s.CostMicros != 600 || s.Calls != 2 {
		t.Fatalf("run spent %+v", s)
	}
}

// A grant whose regions and the host's have none in common refuses the
// call: nothing may be reached.
func TestResidencyDisjointRefuses(t *testing.T) {
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{Residency: []string{"eu"}}, &callRuntime{risk: policy.RiskRead})
	f.grant(t, broker.AccessGrant{Principal: "alice", Plugins: []string{"p"}, Residency: []string{"us"}})
	if _, err := f.invoke(context.Background(), alice, `{}`); !errors.Is(err, broker.ErrResidencyViolation) {
		t.Fatalf("disjoint residency: %v", err)
	}
	if len(f.records(t, "gate.residency")) != 1 {
		t.Fatal("no gate.residency record")
	}
}
