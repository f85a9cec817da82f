package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// approvalGate holds a call the policy marked "require approval" until
// the approvals it names are given by principals other than its caller,
// for this exact request (its digest), within the policy's bound. A call
// whose grant was made from an approval of this request passes at once.
// A retry of the same request after its caller went away waits on, or
// uses, the approval already asked for; one with a changed input is
// refused, and recorded as a violation.
func (ip invokePath) approvalGate(ctx context.Context, id, name string, req InvokeRequest, d *decision) error {
	if d.grant != nil && d.grant.RequestDigest == d.digest {
		_, err := ip.opts.Record(name, "gate.approval", id, map[string]any{"passed": true, "grant_id": d.grant.ID,
			"approval": d.grant.FromApproval})
		return err
	}
	l := ip.opts.Ledger
	if l == nil {
		_, _ = ip.opts.Record(name, "gate.approval", id, map[string]any{"passed": false, "reason": "no ledger"})
		return fmt.Errorf("%w: approvals need the broker's ledger", ErrLedgerUnavailable)
	}
	all, err := l.ListApprovals(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	now := time.Now()
	var a *broker.Approval
	for _, x := range all {
		if x.Requester != req.Caller.ID || x.Plugin != name || x.Method != req.Method || x.RunID != req.Run.RunID {
			continue
		}
		live := x.State == broker.ApprovalPending && now.Before(x.ExpiresAt) ||
			x.State == broker.ApprovalGranted && x.GrantID == "" && !ip.approvalUsed(ctx, x)
		if !live {
			continue
		}
		if x.RequestDigest != d.digest {
			_ = l.RecordViolation(context.WithoutCancel(ctx), broker.Violation{InvocationID: id, PluginID: name,
				Kind: "approval_input_changed", At: now})
			_, _ = ip.opts.Record(name, "gate.approval", id, map[string]any{"passed": false, "reason": "approval_input_changed",
				"approval": x.ID, "violation": true})
			return ErrApprovalInputChanged
		}
		a = x
	}
	if a == nil {
		a = &broker.Approval{ID: broker.NewApprovalID(), RequestDigest: d.digest, Plugin: name, Method: req.Method,
			Requester: req.Caller.ID, Actor: d.actor, RunID: req.Run.RunID, Rule: d.policy.Rule,
			Required: max(d.policy.Approvals, 1), Eligible: d.policy.Approvers, State: broker.ApprovalPending,
			CreatedAt: now.UTC(), ExpiresAt: now.Add(approvalWithin(d.policy.ApprovalWithin)).UTC()}
		if err := l.PutApproval(ctx, a); err != nil {
			return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
		}
		data := map[string]any{"approval": a.ID, "method": req.Method, "requester": a.Requester, "actor": a.Actor,
			"rule": a.Rule, "required": a.Required, "request_digest": a.RequestDigest,
			"expires_at": a.ExpiresAt.Format(time.RFC3339Nano)}
		addRun(data, req.Run)
		if _, err := ip.opts.Record(name, "approval.requested", id, data); err != nil {
			return err
		}
	}
	if req.OnPending != nil && a.State == broker.ApprovalPending {
		req.OnPending(ApprovalPending{ApprovalID: a.ID, Required: a.Required, ExpiresAt: a.ExpiresAt})
	}
	a, err = ip.waitApproval(ctx, a)
	if err != nil {
		return err
	}
	switch a.State {
	case broker.ApprovalGranted:
		if a.GrantID != "" {
			// Approved for several calls: this one is the first under the
			// grant made from it, and counts against its uses.
			g, err := l.GetAccessGrant(ctx, a.GrantID)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
			}
			d.grant = g
		} else if err := ip.useApproval(ctx, a); err != nil {
			return err
		}
		_, err := ip.opts.Record(name, "gate.approval", id, map[string]any{"passed": true, "approval": a.ID,
			"approvers": a.Approvers})
		return err
	case broker.ApprovalDenied:
		_, _ = ip.opts.Record(name, "gate.approval", id, map[string]any{"passed": false, "approval": a.ID, "reason": "denied"})
		return ErrApprovalDenied
	default:
		_, _ = ip.opts.Record(name, "approval.expired", id, map[string]any{"approval": a.ID})
		return ErrApprovalExpired
	}
}

// waitApproval polls the approval until it is decided, expires, or the
// caller goes away (it then stays pending for a retry). At its expiry it
// looks once more: a vote given in time counts even when the last poll
// missed it, and a ledger that cannot say how the approval ended refuses
// the call as unavailable, not as expired.
func (ip invokePath) waitApproval(ctx context.Context, a *broker.Approval) (*broker.Approval, error) {
	poll := ip.opts.Decision.ApprovalPoll
	if poll <= 0 {
		poll = DefaultApprovalPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for a.State == broker.ApprovalPending {
		if !time.Now().Before(a.ExpiresAt) {
			got, err := ip.opts.Ledger.GetApproval(ctx, a.ID)
			if err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return nil, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
			}
			if a = got; a.State == broker.ApprovalPending {
				a.State = broker.ApprovalExpired
			}
			break
		}
		expiry := time.NewTimer(time.Until(a.ExpiresAt))
		select {
		case <-ctx.Done():
			expiry.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		case <-expiry.C:
		}
		expiry.Stop()
		got, err := ip.opts.Ledger.GetApproval(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			continue // a ledger outage while waiting: keep waiting until expiry
		}
		a = got
	}
	return a, nil
}

// An approval without a grant covers one call: using it is a charge of
// one call against the approval's own budget.
func approvalKey(a *broker.Approval) string { return approvalKeyOf(a.ID) }

func approvalKeyOf(id string) string { return "approval:" + id }

func (ip invokePath) useApproval(ctx context.Context, a *broker.Approval) error {
	err := ip.opts.Ledger.Charge(ctx, []broker.BudgetLine{{Key: approvalKey(a), Limits: broker.Limits{Calls: 1}}},
		broker.Spend{Calls: 1})
	if errors.Is(err, broker.ErrBudgetExhausted) {
		return fmt.Errorf("%w: it was used by another call", ErrApprovalExpired)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	return nil
}

func (ip invokePath) approvalUsed(ctx context.Context, a *broker.Approval) bool {
	s, err := ip.opts.Ledger.Spent(ctx, approvalKey(a))
	return err != nil || s.Calls > 0
}

// Approval bounds: the policy's "within", or the default.
const (
	DefaultApprovalWithin = 15 * time.Minute
	MaxApprovalWithin     = 24 * time.Hour
)

func approvalWithin(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultApprovalWithin
	}
	return min(d, MaxApprovalWithin)
}
