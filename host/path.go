package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/internal/randid"
)

// invokePath is the one sequence every call of either kind goes through:
// prepare → policy decision → invocation.start → run → revoke the
// invocation's handles → invocation.outcome.
type invokePath struct {
	opts Options
	// host is the registry the call runs in (nil for InvokeRuntime): it
	// ends calls under a revoked grant and quarantines plugins.
	host *Host
	// base, when set, cancels the invocation with its cause (the host
	// shutting down).
	base context.Context
}

func (ip invokePath) invoke(ctx context.Context, name string, rt Runtime, req InvokeRequest) (out *Outcome, err error) {
	act, err := rt.Prepare(req)
	if err != nil {
		return nil, err
	}
	id := newInvocationID()
	// The invocation's span, a child of the caller's (the control API's):
	// the runtime gives the plugin its traceparent.
	ctx, sp := ip.opts.tracer().Start(ctx, SpanInvocation, trace.WithAttributes(attribute.String(AttrPlugin, name),
		attribute.String(AttrInvocation, id), attribute.String(AttrMethod, req.Method), attribute.String(AttrKind, string(rt.Kind()))))
	defer func() { endInvocationSpan(sp, out, err) }()
	d, err := ip.decideTraced(ctx, id, name, rt, act, req)
	if err != nil {
		return nil, err
	}
	if req.Deadline.IsZero() || !req.Deadline.After(time.Now()) {
		return nil, ErrDeadlineRequired
	}
	if req.OnAdmitted != nil {
		req.OnAdmitted()
	}
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	if ip.base != nil {
		stop := context.AfterFunc(ip.base, func() { cancelCause(context.Cause(ip.base)) })
		defer stop()
	}
	start := map[string]any{"method": req.Method, "dry_run": req.DryRun, "deadline": req.Deadline.UTC().Format(time.RFC3339Nano),
		"principal": req.Caller.ID, "actor": d.actor}
	addRun(start, req.Run)
	traceID := TraceID(ctx)
	if traceID != "" {
		start["trace_id"] = traceID
	}
	if _, err := ip.opts.Record(name, "invocation.start", id, start); err != nil {
		return nil, err
	}
	stopWatch := ip.watch(ctx, id, d, cancelCause)
	call := Call{ID: id, Deadline: req.Deadline, DryRun: req.DryRun, Caller: req.Caller, Actor: req.Actor,
		PolicyDecisionID: d.recordID, OnRunning: req.OnRunning, AppID: req.AppID, AppSlug: req.AppSlug,
		Run: req.Run, ProfileDigest: d.policy.Digest, Budget: d.budget, Residency: d.residency, Scope: d.scope(req.Run),
		SpendTokens: ip.tokenSpend(d)}
	if d.grant != nil {
		call.GrantID = d.grant.ID
	}
	out = act.Run(ctx, call)
	stopWatch()
	out.InvocationID = id
	cause := context.Cause(ctx)
	switch {
	case out.Status == CallSucceeded:
	case errors.Is(cause, ErrHostShutdown), errors.Is(cause, ErrGrantRevoked), errors.Is(cause, ErrViolated):
		out.Status, out.Reason, out.Data = CallFailed, cause.Error(), nil
	}

	// Revoke before anyone is told the call is over.
	outcome := map[string]any{"status": string(out.Status), "reason": out.Reason, "evidence_ids": out.EvidenceIDs}
	if traceID != "" {
		outcome["trace_id"] = traceID
	}
	if ip.opts.Broker != nil {
		maps.Copy(outcome, EndInvocation(ctx, ip.opts.Broker, ip.opts.Log, name, id, req.Deadline))
	}
	ip.settle(ctx, id, name, d, out, outcome)
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
	return randid.Hex(16)
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
