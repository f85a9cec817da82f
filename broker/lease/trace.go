package lease

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/internal/tracing"
)

// Span names (docs/observability.md). A lease span is made only under a
// span of its caller's (the proxy's request span, the broker API's
// revocation call): the manager holds no tracer of its own, and with
// tracing off, or a caller not sampled, it makes none.
const (
	SpanObtain = "airlock.lease.obtain"
	SpanRevoke = "airlock.lease.revoke"
)

// leaseSpan starts span name under ctx's span, naming the intent and the
// invocation; end records the lease's fingerprint (never its id) and
// whether the step failed (no error text: it may quote Vault's).
func leaseSpan(ctx context.Context, name, intent, invocation string) (context.Context, func(fp string, failed bool)) {
	ctx, sp := tracing.Under(ctx, "github.com/airlock-dev/airlock/broker/lease", name,
		trace.WithAttributes(attribute.String("airlock.intent", intent), attribute.String("airlock.invocation", invocation)))
	return ctx, func(fp string, failed bool) {
		if fp != "" {
			sp.SetAttributes(attribute.String("airlock.lease_fp", fp))
		}
		if failed {
			sp.SetStatus(codes.Error, "failed")
		}
		sp.End()
	}
}
