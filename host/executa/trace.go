package executa

import (
	"context"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/tracing"
)

// Span names of the reverse calls a plugin makes during an invoke
// (docs/observability.md).
const (
	SpanSampling = "airlock.sampling"
	SpanStorage  = "airlock.storage"
)

// reverseSpan starts the span of a reverse call made for inv, a child of
// the invoke's span (the host's invocation span, in inv.ctx). Its
// attributes are the plugin, the invocation and, when it ends with an
// error, the JSON-RPC code: never the method the plugin wrote (storage/…
// is the plugin's text) or a value of the call.
func reverseSpan(inv *liveInvoke, method, plugin string) (context.Context, func(*RPCError)) {
	name := SpanStorage
	if strings.HasPrefix(method, "sampling/") {
		name = SpanSampling
	}
	ctx, sp := tracing.Under(inv.ctx, "github.com/airlock-dev/airlock/host/executa", name,
		trace.WithAttributes(attribute.String(host.AttrPlugin, plugin), attribute.String(host.AttrInvocation, inv.id)))
	return ctx, func(e *RPCError) {
		if e != nil {
			sp.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", e.Code))
			sp.SetStatus(codes.Error, strconv.Itoa(e.Code))
		}
		sp.End()
	}
}
