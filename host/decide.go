package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
)

// DecisionConfig is the host.decision section: the budgets every
// invocation and run get, the residency calls get when no grant names
// one, whether every call needs an access grant, and how often a waiting
// or running call looks at the ledger.
type DecisionConfig struct {
	InvocationBudget broker.Limits
	RunBudget        broker.Limits
	Residency        []string
	RequireGrant     bool
	// ApprovalPoll is how often a call waiting for approval looks at it;
	// WatchInterval how often a running call under a grant, or with a
	// reaction to violations, looks at the grant and its violations.
	ApprovalPoll  time.Duration
	WatchInterval time.Duration
}

// Defaults of DecisionConfig.
const (
	DefaultApprovalPoll  = 250 * time.Millisecond
	DefaultWatchInterval = 500 * time.Millisecond
)

// Refusals of the decision point.
var (
	// ErrGrantRequired: host.decision.require_grant is set and no live
	// access grant covers the call.
	ErrGrantRequired = errors.New("no access grant covers this call")
	// ErrApprovalDenied, ErrApprovalExpired: the approval the policy
	// required was denied, or not given in time.
	ErrApprovalDenied  = errors.New("the approval this call required was denied")
	ErrApprovalExpired = errors.New("the approval this call required was not given in time")
	// ErrApprovalInputChanged: the caller has an approval pending or
	// granted for the same plugin, method and run with another request
	// digest: a changed input cannot ride on it.
	ErrApprovalInputChanged = errors.New("an approval is pending or granted for this method and run with another input; it does not cover a changed request")
	// ErrGrantRevoked ends an invocation whose access grant was revoked
	// while it ran; ErrViolated one whose plugin violated and whose policy
	// reaction ends it.
	ErrGrantRevoked = errors.New("the access grant of the call was revoked")
	ErrViolated     = errors.New("the plugin tried to use authority it was not given; the call was ended")
	// ErrLedgerUnavailable: the ledger (grants, approvals, budgets) could
	// not be read; the call is refused rather than run unchecked.
	ErrLedgerUnavailable = errors.New("the ledger of grants, approvals and budgets is unavailable")
)

// ApprovalPending is what a caller is told while its call waits for
// approval (InvokeRequest.OnPending).
type ApprovalPending struct {
	ApprovalID string
	Required   int
	ExpiresAt  time.Time
}

// decision is what the decision point settled for one call.
type decision struct {
	policy    policy.Decision
	recordID  string
	grant     *broker.AccessGrant
	lines     []broker.BudgetLine
	budget    CallBudget
	residency []string
	digest    string
	actor     string
}

func (d *decision) scope(run RunContext) IssueScope {
	s := IssueScope{RunID: run.RunID, Budget: d.lines, Residency: d.residency, OnViolation: d.policy.OnViolation}
	if d.grant != nil {
		s.AccessGrantID = d.grant.ID
	}
	return s
}

// decide runs the decision point for a prepared call, in order: the
// grant that would apply and what was spent, the policy, the grant
// check, approval, budgets. Each step is evidence.
func (ip invokePath) decide(ctx context.Context, id, name string, rt Runtime, act Action, req InvokeRequest) (*decision, error) {
	// The decision, an approval wait included, ends at the call's
	// deadline: an approval given later stays unused for a retry rather
	// than being spent (with the budgets) on a call past its deadline.
	if req.Deadline.IsZero() || !req.Deadline.After(time.Now()) {
		return nil, ErrDeadlineRequired
	}
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	facts := factsOf(act)
	d := &decision{actor: actorString(req.Actor)}
	d.digest = RequestDigest(name, req.Method, inputValue(facts.InputJSON), d.actor, req.DryRun, req.Run.PlanDigest)
	l := ip.opts.Ledger
	now := time.Now()
	var spentRun, spentGrant broker.Spend
	if l != nil {
		grants, err := l.ListAccessGrants(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
		}
		d.grant = broker.SelectGrant(grants, broker.GrantQuery{Principal: req.Caller.ID, Actor: d.actor, Plugin: name,
			Method: req.Method, Risk: riskName(act.Risk()), RunID: req.Run.RunID, PlanDigest: req.Run.PlanDigest,
			RequestDigest: d.digest, Now: now})
		if req.Run.RunID != "" {
			if spentRun, err = l.Spent(ctx, broker.BudgetKeyRun(req.Run.RunID)); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
			}
		}
		if d.grant != nil {
			if spentGrant, err = l.Spent(ctx, broker.BudgetKeyGrant(d.grant.ID)); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
			}
		}
	}
	pol := ip.opts.Policy
	d.policy = policy.Decision{Rule: "no policy"}
	if pol != nil {
		d.policy = pol.Evaluate(policyRequest(name, rt.Kind(), act, facts, req, d.grant, spentRun, spentGrant, now))
	}
	data := map[string]any{"method": req.Method, "dry_run": req.DryRun, "allow": d.policy.Allow,
		"effect": d.policy.Effect.String(), "rule": d.policy.Rule, "risk_class": act.Risk().String(), "kind": string(rt.Kind()),
		"profile_digest": d.policy.Digest, "principal": req.Caller.ID, "principal_method": req.Caller.Method,
		"actor": d.actor, "request_digest": d.digest, "on_violation": reaction(d.policy.OnViolation)}
	if len(d.policy.Errors) > 0 {
		data["errors"] = d.policy.Errors
	}
	addRun(data, req.Run)
	if d.grant != nil {
		data["grant_id"] = d.grant.ID
	}
	rec, err := ip.opts.Record(name, "policy.decision", id, data)
	if err != nil {
		return nil, err
	}
	d.recordID = rec.ID
	if d.policy.Effect == policy.Deny {
		if pol == nil {
			return nil, fmt.Errorf("%w: %w", ErrPolicyDenied, ErrNoPolicy)
		}
		return nil, fmt.Errorf("%w (rule %s)", ErrPolicyDenied, d.policy.Rule)
	}
	if err := ip.grantCheck(name, id, d); err != nil {
		return nil, err
	}
	if d.policy.Effect == policy.RequireApproval {
		if err := ip.approvalGate(ctx, id, name, req, d); err != nil {
			return nil, err
		}
	}
	if ip.host != nil && ip.host.quarantined(name) {
		// Quarantined while the call waited (for the ledger, or approval).
		return nil, ErrPluginQuarantined
	}
	d.residency = ip.opts.Decision.Residency
	if d.grant != nil && len(d.grant.Residency) > 0 {
		d.residency = narrow(d.residency, d.grant.Residency)
		if len(d.residency) == 0 {
			_, _ = ip.opts.Record(name, "gate.residency", id, map[string]any{"allowed": false, "grant_id": d.grant.ID,
				"host": ip.opts.Decision.Residency, "grant": d.grant.Residency})
			return nil, fmt.Errorf("%w: the grant's regions and the host's have none in common", broker.ErrResidencyViolation)
		}
	}
	if err := ip.chargeCall(ctx, id, name, req, d); err != nil {
		return nil, err
	}
	return d, nil
}

// grantCheck is the check after the policy: with require_grant, a call
// no grant covers is refused. The grant that applies is recorded.
func (ip invokePath) grantCheck(name, id string, d *decision) error {
	if d.grant == nil && !ip.opts.Decision.RequireGrant {
		return nil
	}
	data := map[string]any{"covered": d.grant != nil, "required": ip.opts.Decision.RequireGrant}
	if d.grant != nil {
		data["grant_id"] = d.grant.ID
	}
	if _, err := ip.opts.Record(name, "gate.grant", id, data); err != nil {
		return err
	}
	if d.grant == nil {
		return ErrGrantRequired
	}
	return nil
}

// narrow is the regions in both lists (a grant only narrows the host's
// residency); with no host residency, the grant's. Empty: disjoint.
func narrow(host, grant []string) []string {
	if len(host) == 0 {
		return grant
	}
	var out []string
	for _, r := range grant {
		if slices.Contains(host, r) {
			out = append(out, r)
		}
	}
	return out
}

func addRun(data map[string]any, run RunContext) {
	if run.RunID != "" {
		data["run_id"] = run.RunID
	}
	if run.ChangeID != "" {
		data["change_id"] = run.ChangeID
	}
	if run.PlanDigest != "" {
		data["plan_digest"] = run.PlanDigest
	}
}
