package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/testenv"
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

const shortApprovalPolicy = `version: v1
rules:
  - effect: require_approval
    approvals: {count: 1, within: 1s}
`

// A ledger that is down while a call waits for approval, and still down
// when the approval's time is up, refuses the call as ledger_unavailable:
// the approval may have been granted meanwhile, so "expired" (and its
// approval.expired record) would be a claim nobody checked.
func TestApprovalWaitLedgerDownFailsClosed(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead}
	f := newDecisionFixture(t, shortApprovalPolicy, DecisionConfig{}, rt)
	hl := &hookLedger{Ledger: f.ledger}
	hl.getApproval = func(context.Context, string) (*broker.Approval, error) {
		return nil, broker.ErrStoreUnavailable
	}
	f.h.opts.Ledger = hl
	id, done := pendingCall(t, f, context.Background(), alice, `{}`)
	if _, err := f.ledger.DecideApproval(context.Background(), id, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrLedgerUnavailable) {
		t.Fatalf("approval wait through a ledger outage: %v", err)
	}
	if len(rt.calls) != 0 || len(f.records(t, "approval.expired")) != 0 {
		t.Fatal("the call ran, or an unchecked expiry was recorded")
	}
}

// An approval given in time counts even when the waiting call's poll
// comes later than the approval's expiry: the wait ends at the expiry
// and reads the approval then.
func TestApprovalGivenBeforeExpiryCountsWithSlowPoll(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead}
	f := newDecisionFixture(t, shortApprovalPolicy, DecisionConfig{ApprovalPoll: time.Hour}, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, done := pendingCall(t, f, ctx, alice, `{}`)
	if _, err := f.ledger.DecideApproval(ctx, id, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a call approved in time: %v", err)
	}
	if len(rt.calls) != 1 {
		t.Fatalf("%d calls ran", len(rt.calls))
	}
}

// A call that waited for approval while its plugin was quarantined does
// not run once approved: the quarantine is looked at again after the
// wait, not only when the call arrived.
func TestQuarantineWhileAwaitingApprovalRefuses(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskPrivileged}
	f := newDecisionFixture(t, approvalPolicy, DecisionConfig{}, rt)
	id, done := pendingCall(t, f, context.Background(), alice, `{}`)
	if err := f.h.Quarantine(context.Background(), "p", "inv-other", []string{"destination_not_declared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.DecideApproval(context.Background(), id, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrPluginQuarantined) {
		t.Fatalf("approved call of a plugin quarantined meanwhile: %v", err)
	}
	if len(rt.calls) != 0 {
		t.Fatal("the quarantined plugin ran the call")
	}
}

// A quarantine whose record cannot be written to disk is still in force
// in the running host: a full or broken state directory does not leave
// a violating plugin serving.
func TestQuarantineInForceWhenNotKept(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{}, rt)
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.h.opts.QuarantineDir = filepath.Join(notADir, "quarantine")
	if err := f.h.Quarantine(context.Background(), "p", "inv-1", []string{"handle_in_request"}); err == nil {
		t.Fatal("a quarantine that was not kept reported no error")
	}
	if _, err := f.invoke(context.Background(), alice, `{}`); !errors.Is(err, ErrPluginQuarantined) {
		t.Fatalf("call of a plugin whose quarantine was not kept: %v", err)
	}
}

// An approval turned into a grant for N uses covers N calls in all: the
// call that waited for the approval is one of them, not an extra.
func TestApprovalGrantUsesIncludeTheWaitingCall(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskPrivileged}
	f := newDecisionFixture(t, approvalPolicy, DecisionConfig{}, rt)
	ctx := context.Background()
	id, done := pendingCall(t, f, ctx, alice, `{"n":1}`)
	// What POST /v1/approvals/{id}/approve with {"uses": 2} does.
	a, err := f.ledger.DecideApproval(ctx, id, "bob", true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g := f.grant(t, broker.AccessGrant{Principal: a.Requester, Actor: a.Actor, Plugins: []string{a.Plugin},
		Methods: []string{a.Method}, RequestDigest: a.RequestDigest, Uses: 2, FromApproval: a.ID})
	a.GrantID, a.Uses = g.ID, 2
	if err := f.ledger.PutApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the approved call: %v", err)
	}
	var be *broker.BudgetExhaustedError
	for i := range 2 {
		_, err := f.invoke(ctx, alice, `{"n":1}`)
		if i == 0 && err != nil {
			t.Fatalf("second use: %v", err)
		}
		if i == 1 && !errors.As(err, &be) {
			t.Fatalf("third call on an approval for 2 uses: %v", err)
		}
	}
	if len(rt.calls) != 2 {
		t.Fatalf("%d calls ran on an approval for 2 uses", len(rt.calls))
	}
}

// An approval given after the waiting call's deadline is not spent on a
// call that can no longer run: the wait ends at the deadline, and the
// approval serves the caller's retry of the same request.
func TestApprovalWaitEndsAtTheCallDeadline(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskPrivileged}
	f := newDecisionFixture(t, approvalPolicy, DecisionConfig{}, rt)
	deadline := time.Now().Add(2 * time.Second)
	pending := make(chan ApprovalPending, 1)
	done := make(chan error, 1)
	go func() {
		_, err := f.invoke(context.Background(), alice, `{"n":1}`, func(r *InvokeRequest) {
			r.Deadline = deadline
			r.OnPending = func(p ApprovalPending) { pending <- p }
		})
		done <- err
	}()
	var p ApprovalPending
	select {
	case p = <-pending:
	case err := <-done:
		t.Fatalf("the call ended before it was held for approval: %v", err)
	}
	// The wait ends at the call's deadline, with no approval; the
	// approval comes after it.
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a call past its deadline succeeded")
		}
	case <-time.After(time.Until(deadline) + 30*time.Second):
		t.Fatal("the held call outlived its deadline")
	}
	if _, err := f.ledger.DecideApproval(context.Background(), p.ApprovalID, "bob", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := f.invoke(ctx, alice, `{"n":1}`); err != nil {
		t.Fatalf("the retry of the approved request: %v", err)
	}
	if len(rt.calls) != 1 {
		t.Fatalf("%d calls ran", len(rt.calls))
	}
}

// A quarantine on a full disk is kept across a restart all the same:
// its record does not fit, and the empty file left in its place keeps
// the plugin quarantined, without details, until an operator releases
// it.
func TestQuarantineKeptOnFullDisk(t *testing.T) {
	mnt := testenv.SmallDisk(t, 64<<10)
	rt := &callRuntime{risk: policy.RiskRead}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{}, rt)
	f.h.opts.QuarantineDir = filepath.Join(mnt, "quarantine")
	_ = f.h.loadQuarantine("p") // the plugin's registration makes the directory
	testenv.FillDisk(t, filepath.Join(mnt, "filler"))
	if err := f.h.Quarantine(context.Background(), "p", "inv-1", []string{"handle_in_request"}); err != nil {
		t.Fatalf("a quarantine kept as an empty mark reported: %v", err)
	}
	if st, err := os.Stat(f.h.quarantineFile("p")); err != nil || st.Size() != 0 {
		t.Fatalf("the mark: %v %v", st, err)
	}
	// What a restarted host reads.
	if q := f.h.loadQuarantine("p"); q == nil || q.At.IsZero() {
		t.Fatalf("after a restart the plugin is not quarantined: %+v", q)
	}
	if released, err := f.h.Release("p", "operator"); err != nil || !released {
		t.Fatalf("release: %v %v", released, err)
	}
	if q := f.h.loadQuarantine("p"); q != nil {
		t.Fatalf("still quarantined after the release: %+v", q)
	}
}

// The directory that keeps quarantines is made when a plugin is
// registered, not first on a full disk, where a new directory needs a
// data block (on ext4; an empty mark in it needs none) and the
// quarantine would be lost to a restart.
func TestQuarantineDirMadeAtRegistration(t *testing.T) {
	rt := &callRuntime{risk: policy.RiskRead}
	f := newDecisionFixture(t, allowPolicy, DecisionConfig{}, rt)
	f.h.opts.QuarantineDir = filepath.Join(t.TempDir(), "quarantine")
	if q := f.h.loadQuarantine("p"); q != nil {
		t.Fatalf("quarantined: %+v", q)
	}
	if st, err := os.Stat(f.h.opts.QuarantineDir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("the quarantine directory after registration: %v %v", st, err)
	}
}
