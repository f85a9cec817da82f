package plugin

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// Traceparent is the W3C traceparent the host sent with the Invoke whose
// context ctx is (TraceparentMetadata), "" when it sent none (the host
// does not trace). A provider makes its spans children of it (an
// OpenTelemetry propagator reads the same metadata), or sends it as the
// traceparent header of its requests through the egress proxy, which
// makes its own span of each request a child of it.
func Traceparent(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(TraceparentMetadata); len(v) == 1 && len(v[0]) == 55 {
		return v[0]
	}
	return ""
}
