package host

import (
	"context"

	"github.com/airlock-dev/airlock/broker"
)

// revokeInvocation revokes the invocation's handles and leases, and
// returns the leases it ended, for the invocation's outcome evidence:
// each as {intent, lease_fp, revoked} (revoked false: the broker is still
// retrying; the lease dies at its Vault TTL at the latest).
func revokeInvocation(ctx context.Context, opts Options, plugin, id string) []map[string]any {
	ctx = context.WithoutCancel(ctx)
	ender, ok := opts.Broker.(broker.InvocationEnder)
	if !ok {
		if _, err := opts.Broker.RevokeInvocation(ctx, id); err != nil {
			opts.Log.Error("revoke invocation handles", "plugin", plugin, "invocation", id, "err", err)
		}
		return nil
	}
	end, err := ender.EndInvocation(ctx, id)
	if err != nil {
		opts.Log.Error("revoke invocation handles", "plugin", plugin, "invocation", id, "err", err)
	}
	var out []map[string]any
	for _, l := range end.Leases {
		out = append(out, map[string]any{"intent": l.Intent, "lease_fp": l.Fingerprint, "revoked": l.Revoked})
	}
	return out
}
