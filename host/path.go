package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
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
	decision := policy.Decision{Rule: "no policy"}
	if ip.opts.Policy != nil {
		decision = ip.opts.Policy.Decide(name, req.Method, act.Risk(), req.DryRun)
	}
	rec, err := ip.opts.Record(name, "policy.decision", "", map[string]any{"method": req.Method, "dry_run": req.DryRun,
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
	if _, err := ip.opts.Record(name, "invocation.start", id, map[string]any{"method": req.Method, "dry_run": req.DryRun,
		"deadline": req.Deadline.UTC().Format(time.RFC3339Nano)}); err != nil {
		return nil, err
	}
	out := act.Run(ctx, Call{ID: id, Deadline: req.Deadline, DryRun: req.DryRun, Caller: req.Caller, Actor: req.Actor,
		PolicyDecisionID: rec.ID, OnRunning: req.OnRunning, AppID: req.AppID, AppSlug: req.AppSlug})
	out.InvocationID = id
	if out.Status != CallSucceeded && errors.Is(context.Cause(ctx), ErrHostShutdown) {
		out.Status, out.Reason, out.Data = CallFailed, ErrHostShutdown.Error(), nil
	}

	// Revoke before anyone is told the call is over.
	outcome := map[string]any{"status": string(out.Status), "reason": out.Reason, "evidence_ids": out.EvidenceIDs}
	if ip.opts.Broker != nil {
		maps.Copy(outcome, revokeInvocation(ctx, ip.opts, name, id, req.Deadline))
	}
	if _, err := ip.opts.Record(name, "invocation.outcome", id, outcome); err != nil {
		// The call ran and cannot be undone; the caller is told its
		// outcome is not in the evidence, with the outcome beside it.
		return out, fmt.Errorf("%w: the call ran (invocation %s), but its outcome was not recorded", err, id)
	}
	return out, nil
}

// CancelReason says why ctx ended, for a FAILED outcome of a runtime.
func CancelReason(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), ErrHostShutdown) {
		return ErrHostShutdown.Error()
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return "the call was cancelled"
	}
	return "deadline passed; the call was cancelled"
}

// Record appends a host-authored evidence record (the runtimes record
// their launches, shutdowns and what a plugin asked for through it). A
// failure is logged and returned as evidence.ErrUnavailable, which
// refuses the step it records, unless the log fails open (then it is only
// logged).
func (o Options) Record(plugin, typ, invocation string, data map[string]any) (evidence.Record, error) {
	if o.Evidence == nil {
		return evidence.Record{}, nil
	}
	b, _ := jsonMarshal(data)
	r, err := o.Evidence.Append(evidence.Record{Type: typ, Plugin: plugin, Invocation: invocation, Data: b})
	if err == nil {
		return r, nil
	}
	if o.Log != nil {
		o.Log.Error("evidence append failed", "plugin", plugin, "type", typ, "fail_open", o.Evidence.FailOpen, "err", err)
	}
	if o.Evidence.FailOpen {
		return r, nil
	}
	return r, evidence.ErrUnavailable
}

func newInvocationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func jsonMarshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// InvokeRuntime runs one call on rt, a runtime started outside the
// registry (pluginv1.Plugin.Invoke), through the invoke path Host.Invoke
// uses: policy decision, evidence, run, handle revocation, outcome. opts
// are the runtime's own.
func InvokeRuntime(ctx context.Context, opts Options, name string, rt Runtime, req InvokeRequest) (*Outcome, error) {
	return invokePath{opts: opts}.invoke(ctx, name, rt, req)
}
