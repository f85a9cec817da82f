package api

import (
	"context"
	"path"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/airlock-dev/airlock/internal/tracing"
)

// Trace context across the broker socket: the client sends the W3C
// traceparent of the caller's span (the host's credential issue) as gRPC
// metadata; the server makes a span of the call a child of it. Only
// traceparent crosses: tracestate is never sent or read.

// SpanPrefix names the server's span of a call: "airlock.broker." and
// the method ("airlock.broker.IssueHandle").
const SpanPrefix = "airlock.broker."

const traceparentMetadata = "traceparent"

// traceOut adds the traceparent of ctx's span, when it has one, to a
// call's outgoing metadata.
func traceOut(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if trace.SpanContextFromContext(ctx).IsValid() {
		if tp := tracing.Traceparent(ctx); tp != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, traceparentMetadata, tp)
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// traceIn makes a server span of each call, a child of the caller's
// traceparent. Its attributes are the RPC's system, service and method
// and, on an error, the gRPC code: nothing of the request.
func traceIn(tracer trace.Tracer) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(traceparentMetadata); len(v) == 1 {
			ctx = tracing.Parent(ctx, v[0])
		}
		ctx, sp := tracer.Start(ctx, SpanPrefix+path.Base(info.FullMethod), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", path.Base(info.FullMethod))))
		resp, err := h(ctx, req)
		if err != nil {
			c := status.Code(err)
			sp.SetAttributes(attribute.Int("rpc.grpc.status_code", int(c)))
			sp.SetStatus(codes.Error, c.String())
		}
		sp.End()
		return resp, err
	}
}
