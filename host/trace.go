package host

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/airlock-dev/airlock/internal/tracing"
)

// Span names of the invoke path (docs/observability.md lists them with
// their attributes; nothing else is set on them).
const (
	SpanInvocation      = "airlock.invocation"
	SpanPolicy          = "airlock.policy"
	SpanCredentialIssue = "airlock.credential.issue"
)

// Attribute keys the host's spans carry: names the host validated or
// minted, never a value of the call's input, a handle or a token.
const (
	AttrPlugin     = "airlock.plugin"
	AttrInvocation = "airlock.invocation"
	AttrMethod     = "airlock.method"
	AttrKind       = "airlock.kind"
	AttrDecision   = "airlock.decision"
	AttrStatus     = "airlock.status"
	AttrIntent     = "airlock.intent"
	AttrHandleFP   = "airlock.handle_fp"
)

var noopTracer = noop.NewTracerProvider().Tracer("")

// tracer is o's tracer, a no-op one when none is set.
func (o Options) tracer() trace.Tracer {
	if o.Tracer == nil {
		return noopTracer
	}
	return o.Tracer
}

// TraceID is the trace id of ctx's span as hex, "" when it has none
// (tracing off): what the evidence records carry.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// StartCredentialSpan starts the span of one credential issue of an
// invocation, a child of the invocation's span (parent, as the runtime
// kept it): the plugin's own callback carries no trace of the host's.
// end records the outcome: the handle's fingerprint, or a refusal (no
// reason text: it may quote the broker's).
func StartCredentialSpan(ctx context.Context, parent trace.Span, plugin, invocation, intent string) (context.Context, func(handleFP string, err error)) {
	ctx, sp := tracing.Under(trace.ContextWithSpan(ctx, parent), "github.com/airlock-dev/airlock/host", SpanCredentialIssue,
		trace.WithAttributes(attribute.String(AttrPlugin, plugin), attribute.String(AttrInvocation, invocation),
			attribute.String(AttrIntent, intent)))
	return ctx, func(fp string, err error) {
		if err != nil {
			sp.SetAttributes(attribute.String(AttrDecision, "refuse"))
			sp.SetStatus(codes.Error, "refused")
		} else {
			sp.SetAttributes(attribute.String(AttrDecision, "allow"), attribute.String(AttrHandleFP, fp))
		}
		sp.End()
	}
}

// decideTraced is decide in its span: the policy decision, the grant
// check, an approval waited for and the budget charge.
func (ip invokePath) decideTraced(ctx context.Context, id, name string, rt Runtime, act Action, req InvokeRequest) (*decision, error) {
	ctx, sp := ip.opts.tracer().Start(ctx, SpanPolicy)
	d, err := ip.decide(ctx, id, name, rt, act, req)
	if err != nil {
		sp.SetAttributes(attribute.String(AttrDecision, "refuse"))
		sp.SetStatus(codes.Error, "refused")
	} else {
		sp.SetAttributes(attribute.String(AttrDecision, "allow"))
	}
	sp.End()
	return d, err
}

// endInvocationSpan ends an invocation's span with how the call ended:
// its status, or a refusal before it reached the plugin (no reason text).
func endInvocationSpan(sp trace.Span, out *Outcome, err error) {
	switch {
	case err != nil && out == nil:
		sp.SetStatus(codes.Error, "refused")
	case out != nil:
		sp.SetAttributes(attribute.String(AttrStatus, string(out.Status)))
		if out.Status != CallSucceeded {
			sp.SetStatus(codes.Error, string(out.Status))
		}
	}
	sp.End()
}
