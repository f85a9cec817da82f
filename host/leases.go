package host

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// Backoff of an invocation end the broker did not acknowledge.
const (
	endRetryFirst = 200 * time.Millisecond
	endRetryMax   = 5 * time.Second
)

// EndInvocation is the one owner of an invocation's end: every end —
// the invoke path's (Host.Invoke, for either kind of plugin) and the
// sampling backend's own invocation of the model's credential — revokes
// the invocation's handles and leases here, before anyone is told the
// invocation is over. It returns what it revoked and what is still
// owed, for the invocation's outcome evidence:
//
//   - handles_revoked: how many live handles the broker revoked;
//   - handles_owed: true when the revocation is not acknowledged yet (the
//     broker could not be reached, or its handle store could not make the
//     revocation durable); the host then asks again in the background,
//     with backoff, until the broker acknowledges it or the invocation's
//     deadline (when its handles expire) has passed;
//   - leases_revoked: each leased secret the end revoked, as {intent,
//     lease_fp, revoked} (revoked false: owed; the broker retries until
//     Vault confirms or the lease expires there).
//
// A plugin's end is not an invocation's: the launch layer revokes the
// plugin's handles and pass after every exit of its process.
func EndInvocation(ctx context.Context, api broker.API, log *slog.Logger, plugin, id string, deadline time.Time) map[string]any {
	if log == nil {
		log = discardLogger()
	}
	ctx = context.WithoutCancel(ctx)
	end, err := endInvocation(ctx, api, id)
	owed := err != nil || end.HandlesOwed
	if err != nil {
		log.Error("revoke invocation handles", "plugin", plugin, "invocation", id, "err", err)
	}
	if owed {
		go retryEnd(ctx, api, log, plugin, id, deadline)
	}
	leases := []map[string]any{}
	for _, l := range end.Leases {
		leases = append(leases, map[string]any{"intent": l.Intent, "lease_fp": l.Fingerprint, "revoked": l.Revoked})
	}
	return map[string]any{"handles_revoked": end.Handles, "handles_owed": owed, "leases_revoked": leases}
}

// endInvocation ends the invocation through api, with what it revoked
// when api says (broker.InvocationEnder).
func endInvocation(ctx context.Context, api broker.API, id string) (broker.InvocationEnd, error) {
	if ender, ok := api.(broker.InvocationEnder); ok {
		return ender.EndInvocation(ctx, id)
	}
	n, err := api.RevokeInvocation(ctx, id)
	if err != nil && errors.Is(err, broker.ErrRevocationOwed) {
		return broker.InvocationEnd{HandlesOwed: true}, nil
	}
	return broker.InvocationEnd{Handles: n}, err
}

// retryEnd asks the broker again to end the invocation until it
// acknowledges the handles' revocation or they have expired. Ending is
// idempotent: a lease already revoked is not found again.
func retryEnd(ctx context.Context, api broker.API, log *slog.Logger, plugin, id string, deadline time.Time) {
	wait := endRetryFirst
	for attempt := 2; ; attempt++ {
		t := time.NewTimer(wait)
		<-t.C
		if !time.Now().Before(deadline) {
			log.Warn("owed revocation dropped: the invocation's handles have expired", "plugin", plugin,
				"invocation", id, "attempts", attempt-1)
			return
		}
		rctx, cancel := context.WithTimeout(ctx, endRetryMax)
		end, err := endInvocation(rctx, api, id)
		cancel()
		if err == nil && !end.HandlesOwed {
			log.Info("owed revocation acknowledged", "plugin", plugin, "invocation", id, "attempts", attempt,
				"handles", end.Handles)
			return
		}
		wait = min(2*wait, endRetryMax)
	}
}
