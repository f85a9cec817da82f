package control

import (
	"context"

	"github.com/airlock-dev/airlock/host"
)

type callerKey struct{}

// WithCaller returns ctx carrying the authenticated principal of a
// control API request; the authentication middleware sets it before any
// route runs.
func WithCaller(ctx context.Context, p host.Principal) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

// CallerFrom returns the principal WithCaller put in ctx, and whether
// there is one.
func CallerFrom(ctx context.Context) (host.Principal, bool) {
	p, ok := ctx.Value(callerKey{}).(host.Principal)
	return p, ok
}
