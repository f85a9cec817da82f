package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
)

const approvalPolicy = `version: v1
rules:
  - name: privileged-needs-a-second-person
    effect: require_approval
    risk_classes: [privileged]
    approvals: {count: 1, within: 1m}
  - name: rest
    effect: allow
`

// pendingCall starts a call that waits for approval and returns the
// approval id it was told, and where its result arrives.
func pendingCall(t *testing.T, f *decisionFixture, ctx context.Context, caller Principal, input string) (string, <-chan error) {
	t.Helper()
	pending := make(chan ApprovalPending, 1)
	done := make(chan error, 1)
	go func() {
		_, err := f.invoke(ctx, caller, input, func(r *InvokeRequest) {
			r.OnPending = func(p ApprovalPending) { pending <- p }
		})
		done <- err
	}()
	select {
	case p := <-pending:
		if p.Required != 1 || p.ApprovalID == "" {
			t.Fatalf("pending %+v", p)
		}
		return p.ApprovalID, done
	case err := <-done:
		t.Fatalf("the call did not wait for approval: %v", err)
	}
	return "", nil
}

// A PRIVILEGED call waits until a principal other than its caller
// approves it; the caller's own approval does not count.
func TestApprovalBySecondPrincipal(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskPrivileged}
	f := newDecisionFixture(t, approvalPolicy, DecisionConfig{}, rt)
	id, done := pendingCall(t, f, context.Background(), alice, `{"n":1}`)
	ctx := context.Background()
	if _, err := f.ledger.DecideApproval(ctx, id, "alice", true, time.Now()); err == nil {
		t.Fatal("the requester approved her own call")
	}
	select {
	case err := <-done:
		t.Fatalf("the call ran on its requester's approval: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := f.ledger.DecideApproval(ctx, id, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("approved call: %v", err)
	}
	if len(rt.calls) != 1 {
		t.Fatalf("%d calls ran", len(rt.calls))
	}
	if len(f.records(t, "approval.requested")) != 1 || len(f.records(t, "gate.approval")) != 1 {
		t.Fatal("approval.requested / gate.approval not recorded")
	}
	// The approval covered one call: the same request again asks anew.
	id2, done2 := pendingCall(t, f, ctx, alice, `{"n":1}`)
	if id2 == id {
		t.Fatal("a used approval was waited on again")
	}
	if _, err := f.ledger.DecideApproval(ctx, id2, "bob", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-done2; !errors.Is(err, ErrApprovalDenied) {
		t.Fatalf("denied call: %v", err)
	}
}

// A caller that went away while waiting finds its approval again when
// it retries the same request; a retry with a changed input is refused
// and recorded as a violation.
func TestApprovalRetrySameAndChangedInput(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskPrivileged}
	f := newDecisionFixture(t, approvalPolicy, DecisionConfig{}, rt)
	ctx, cancel := context.WithCancel(context.Background())
	id, done := pendingCall(t, f, ctx, alice, `{"amount":10}`)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a call whose caller left ran")
	}
	_, err := f.invoke(context.Background(), alice, `{"amount":11}`)
	if !errors.Is(err, ErrApprovalInputChanged) {
		t.Fatalf("changed input: %v", err)
	}
	if _, err := f.ledger.DecideApproval(context.Background(), id, "carol", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.invoke(context.Background(), alice, `{"amount":10}`); err != nil {
		t.Fatalf("the approved request, retried: %v", err)
	}
	if len(f.records(t, "approval.requested")) != 1 {
		t.Fatal("the retry asked for a second approval")
	}
}

// An approval not given in time refuses the call and is recorded.
func TestApprovalExpires(t *testing.T) {
	pol := `version: v1
rules:
  - effect: require_approval
    approvals: {count: 2, within: 1s}
`
	f := newDecisionFixture(t, pol, DecisionConfig{}, &callRuntime{risk: policy.RiskRead})
	if _, err := f.invoke(context.Background(), alice, `{}`); !errors.Is(err, ErrApprovalExpired) {
		t.Fatalf("unapproved call: %v", err)
	}
	if len(f.records(t, "approval.expired")) != 1 {
		t.Fatal("approval.expired not recorded")
	}
}

// Revoking a grant ends the calls in flight under it: at once through
// this host, and at the next look when another replica revoked it in the
// shared ledger.
func TestRevokedGrantEndsCallsInFlight(t *testing.T) {
	running := make(chan string, 2)
	rt := &callRuntime{risk: policy.RiskRead, run: func(ctx context.Context, c Call) *Outcome {
		running <- c.GrantID
		if c.GrantID == "" {
			return &Outcome{Status: CallSucceeded}
		}
		<-ctx.Done()
		return &Outcome{Status: CallCancelled, Reason: CancelReason(ctx)}
	}}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{WatchInterval: 20 * time.Millisecond}, rt)
	g := f.grant(t, broker.AccessGrant{Principal: "alice", Plugins: []string{"p"}})
	for _, revoke := range []func(){
		func() { f.h.GrantRevoked(g.ID) },
		func() { _, _ = f.ledger.RevokeAccessGrant(context.Background(), g.ID, "ops", time.Now()) },
	} {
		done := make(chan *Outcome, 1)
		go func() {
			out, err := f.invoke(context.Background(), alice, `{}`)
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		if got := <-running; got != g.ID {
			t.Fatalf("call ran under grant %q", got)
		}
		revoke()
		out := <-done
		if out == nil || out.Status != CallFailed || out.Reason != ErrGrantRevoked.Error() {
			t.Fatalf("outcome %+v", out)
		}
	}
	// Revoked: the next call has no grant to run under.
	_, err := f.invoke(context.Background(), alice, `{}`)
	if err != nil {
		t.Fatalf("a call with no grant under an allow-all policy: %v", err)
	}
	if got := <-running; got != "" {
		t.Fatalf("a revoked grant %q still applied", got)
	}
}

// A violation while the call runs marks the outcome; with the reaction
// "quarantine" the plugin serves no call until an operator releases it,
// across a restart of the host.
func TestViolationQuarantines(t *testing.T) {
	pol := "version: v1\ndefault: allow\non_violation: quarantine\n"
	var f *decisionFixture
	rt := &callRuntime{risk: policy.RiskRead, run: func(ctx context.Context, c Call) *Outcome {
		_ = f.ledger.RecordViolation(ctx, broker.Violation{InvocationID: c.ID, PluginID: "p",
			Kind: "destination_not_declared", At: time.Now()})
		<-ctx.Done() // the watcher ends the call
		return &Outcome{Status: CallSucceeded}
	}}
	f = newDecisionFixture(t, pol, DecisionConfig{}, rt)
	out, err := f.invoke(context.Background(), alice, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Violated || len(out.Violations) != 1 || out.Violations[0] != "destination_not_declared" || out.Status == CallSucceeded {
		t.Fatalf("outcome %+v", out)
	}
	rec := f.records(t, "invocation.outcome")
	if d := dataOf(t, rec[len(rec)-1]); d["violated"] != true || d["reaction"] != "quarantine" {
		t.Fatalf("outcome record %v", d)
	}
	if _, err := f.invoke(context.Background(), alice, `{}`); !errors.Is(err, ErrPluginQuarantined) {
		t.Fatalf("call to a quarantined plugin: %v", err)
	}
	// A new host on the same quarantine directory keeps it.
	h2 := New(f.opts)
	defer h2.Shutdown(context.Background())
	if err := h2.Add("p", KindPluginV1, func(context.Context) (Runtime, error) { return &callRuntime{}, nil }); err != nil {
		t.Fatal(err)
	}
	if st := h2.Status(); st[0].Quarantined == nil || st[0].Quarantined.Kinds[0] != "destination_not_declared" {
		t.Fatalf("status after restart: %+v", st[0])
	}
	if ok, err := h2.Release("p", "ops"); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if _, err := h2.Invoke(context.Background(), "p", InvokeRequest{Method: "m", Caller: alice,
		Deadline: time.Now().Add(time.Minute)}); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if len(f.records(t, "plugin.quarantined")) != 1 || len(f.records(t, "plugin.released")) != 1 {
		t.Fatal("quarantine / release not recorded")
	}
}
