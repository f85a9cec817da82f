package host

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
)

// hookLedger is a ledger that runs a test's function before a charge
// (the last step of the decision) or fails the reads a test names.
type hookLedger struct {
	broker.Ledger
	beforeCharge func()
	getApproval  func(ctx context.Context, id string) (*broker.Approval, error)
}

func (l *hookLedger) Charge(ctx context.Context, lines []broker.BudgetLine, add broker.Spend) error {
	if l.beforeCharge != nil {
		l.beforeCharge()
	}
	return l.Ledger.Charge(ctx, lines, add)
}

func (l *hookLedger) GetApproval(ctx context.Context, id string) (*broker.Approval, error) {
	if l.getApproval != nil {
		return l.getApproval(ctx, id)
	}
	return l.Ledger.GetApproval(ctx, id)
}

// A grant revoked after the decision chose it and before the call is
// registered under it (another replica's revocation, or this host's
// before the call was watched) does not let the call run: the plugin
// gets a context already ended, and the outcome is FAILED "revoked".
func TestGrantRevokedBetweenDecisionAndRun(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead, run: func(ctx context.Context, _ Call) *Outcome {
		if ctx.Err() != nil {
			return &Outcome{Status: CallFailed, Reason: CancelReason(ctx)}
		}
		return &Outcome{Status: CallSucceeded}
	}}
	// The watcher's next look is far away: only the check at the start
	// can catch the revocation.
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{RequireGrant: true, WatchInterval: time.Hour}, rt)
	g := f.grant(t, broker.AccessGrant{Principal: "alice", Plugins: []string{"p"}})
	hl := &hookLedger{Ledger: f.ledger}
	hl.beforeCharge = func() {
		hl.beforeCharge = nil
		if _, err := f.ledger.RevokeAccessGrant(context.Background(), g.ID, "operator", time.Now()); err != nil {
			t.Error(err)
		}
		f.h.GrantRevoked(g.ID) // what the control API does next: no call is registered yet
	}
	f.h.opts.Ledger = hl
	out, err := f.invoke(context.Background(), alice, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != CallFailed || out.Reason != ErrGrantRevoked.Error() {
		t.Fatalf("a call under a grant revoked before it ran: %s %q", out.Status, out.Reason)
	}
}
