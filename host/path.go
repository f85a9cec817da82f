package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
)

// invokePath is the one sequence every call of either kind goes through:
// prepare → policy decision → invocation.start → run → revoke the
// invocation's handles → invocation.outcome.
type invokePath struct {
	opts Options
	// base, when set, cancels the invocation with its cause (the host
	// shutting down).
	base context.Context
}

func (ip invokePath) invoke(ctx context.Context, name string, rt Runtime, req InvokeRequest) (*Outcome, error) {
	act, err := rt.Prepare(req)
	if err != nil {
		return nil, err
	}
	decision := Decision{Rule: "no policy"}
	if ip.opts.Policy != nil {
		decision = ip.opts.Policy.Decide(name, req.Method, act.Risk(), req.DryRun)
	}
	rec, err := ip.opts.record(name, "policy.decision", "", map[string]any{"method": req.Method, "dry_run": req.DryRun,
		"allow": decision.Allow, "rule": decision.Rule, "risk_class": act.Risk().String(), "kind": string(rt.Kind())})
	if err != nil {
		return nil, err
	}
	if !decision.Allow {
		if ip.opts.Policy == nil {
			return nil, fmt.Errorf("%w: %w", ErrPolicyDenied, ErrNoPolicy)
		}
		return nil, fmt.Errorf("%w (rule %s)", ErrPolicyDenied, decision.Rule)
	}
	if req.Deadline.IsZero() || !req.Deadline.After(time.Now()) {
		return nil, ErrDeadlineRequired
	}
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	if ip.base != nil {
		var cancelCause context.CancelCauseFunc
		ctx, cancelCause = context.WithCancelCause(ctx)
		stop := context.AfterFunc(ip.base, func() { cancelCause(context.Cause(ip.base)) })
		defer stop()
		defer cancelCause(nil)
	}
	id := newInvocationID()
	if _, err := ip.opts.record(name, "invocation.start", id, map[string]any{"method": req.Method, "dry_run": req.DryRun,
		"deadline": req.Deadline.UTC().Format(time.RFC3339Nano)}); err != nil {
		return nil, err
	}
	out := act.Run(ctx, Call{ID: id, Deadline: req.Deadline, DryRun: req.DryRun, Actor: req.Actor,
		PolicyDecisionID: rec.ID, OnRunning: req.OnRunning, AppID: req.AppID, AppSlug: req.AppSlug})
	out.InvocationID = id
	if out.Status != pluginv1.Status_STATUS_SUCCEEDED && errors.Is(context.Cause(ctx), ErrHostShutdown) {
		out.Status, out.Reason, out.Result, out.Data = pluginv1.Status_STATUS_FAILED, ErrHostShutdown.Error(), nil, nil
	}

	// Revoke before anyone is told the call is over.
	outcome := map[string]any{"status": out.Status.String(), "reason": out.Reason, "evidence_ids": out.EvidenceIDs}
	if ip.opts.Broker != nil {
		if leases := revokeInvocation(ctx, ip.opts, name, id); len(leases) > 0 {
			outcome["leases_revoked"] = leases
		}
	}
	if _, err := ip.opts.record(name, "invocation.outcome", id, outcome); err != nil {
		// The call ran and cannot be undone; the caller is told its
		// outcome is not in the evidence, with the outcome beside it.
		return out, fmt.Errorf("%w: the call ran (invocation %s), but its outcome was not recorded", err, id)
	}
	return out, nil
}

// cancelReason says why ctx ended, for a FAILED outcome.
func cancelReason(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), ErrHostShutdown) {
		return ErrHostShutdown.Error()
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return "the call was cancelled"
	}
	return "deadline passed; the call was cancelled"
}

// record appends a host-authored evidence record. A failure is logged and
// returned as ErrEvidenceUnavailable, which refuses the step it records,
// unless the log fails open (then it is only logged).
func (o Options) record(plugin, typ, invocation string, data map[string]any) (Record, error) {
	if o.Evidence == nil {
		return Record{}, nil
	}
	b, _ := jsonMarshal(data)
	r, err := o.Evidence.Append(Record{Type: typ, Plugin: plugin, Invocation: invocation, Data: b})
	if err == nil {
		return r, nil
	}
	if o.Log != nil {
		o.Log.Error("evidence append failed", "plugin", plugin, "type", typ, "fail_open", o.Evidence.FailOpen, "err", err)
	}
	if o.Evidence.FailOpen {
		return r, nil
	}
	return r, ErrEvidenceUnavailable
}
