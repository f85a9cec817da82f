package host

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/policy"
)

// grantCalls are the invocations in flight under each access grant, so
// that revoking a grant through this host ends them at once.
type grantCalls struct {
	mu    sync.Mutex
	calls map[string]map[string]context.CancelCauseFunc // grant -> invocation -> cancel
}

func (g *grantCalls) add(grant, inv string, cancel context.CancelCauseFunc) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls == nil {
		g.calls = map[string]map[string]context.CancelCauseFunc{}
	}
	if g.calls[grant] == nil {
		g.calls[grant] = map[string]context.CancelCauseFunc{}
	}
	g.calls[grant][inv] = cancel
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.calls[grant], inv)
		if len(g.calls[grant]) == 0 {
			delete(g.calls, grant)
		}
	}
}

// GrantRevoked ends every invocation in flight under the access grant
// (its handles are revoked as the invocation ends, before its outcome is
// recorded), as Shutdown does for the host's; it returns how many. The
// control API calls it after revoking a grant; other hosts sharing the
// ledger see the revocation at their next look (DecisionConfig.
// WatchInterval).
func (h *Host) GrantRevoked(grantID string) int {
	h.grants.mu.Lock()
	defer h.grants.mu.Unlock()
	for _, cancel := range h.grants.calls[grantID] {
		cancel(ErrGrantRevoked)
	}
	return len(h.grants.calls[grantID])
}

// watch looks, while the call runs, at its grant (revoked or expired
// ends the call) and, when the policy's reaction to a violation is to
// end the call, at its violations. It returns the function that stops
// looking.
func (ip invokePath) watch(ctx context.Context, id string, d *decision, cancel context.CancelCauseFunc) func() {
	var stops []func()
	if d.grant != nil && ip.host != nil {
		stops = append(stops, ip.host.grants.add(d.grant.ID, id, cancel))
	}
	l := ip.opts.Ledger
	if d.grant != nil && l != nil && grantEnded(ctx, l, d.grant.ID) {
		// Revoked after the decision chose it and before the call was
		// registered above, where GrantRevoked could not reach it: the
		// call starts ended.
		cancel(ErrGrantRevoked)
	}
	react := d.policy.OnViolation == policy.OnViolationEnd || d.policy.OnViolation == policy.OnViolationQuarantine
	if l != nil && (d.grant != nil || react) {
		every := ip.opts.Decision.WatchInterval
		if every <= 0 {
			every = DefaultWatchInterval
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if d.grant != nil && grantEnded(ctx, l, d.grant.ID) {
					cancel(ErrGrantRevoked)
					return
				}
				if react {
					if vs, err := l.Violations(ctx, id); err == nil && len(vs) > 0 {
						cancel(ErrViolated)
						return
					}
				}
			}
		}()
		stops = append(stops, func() { close(done); wg.Wait() })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// grantEnded says whether the ledger knows the grant as revoked,
// expired or gone; a ledger that cannot answer is asked again at the
// next look.
func grantEnded(ctx context.Context, l broker.Ledger, id string) bool {
	g, err := l.GetAccessGrant(ctx, id)
	if errors.Is(err, broker.ErrGrantUnknown) {
		return true
	}
	return err == nil && (!g.RevokedAt.IsZero() || !time.Now().Before(g.NotAfter))
}

// settle is the decision point's part of the outcome: the cost the
// plugin reported is charged to the call's budgets, its violations are
// read and marked (violated: nothing downstream should trust its
// result), and a quarantine reaction quarantines the plugin.
func (ip invokePath) settle(ctx context.Context, id, name string, d *decision, out *Outcome, outcome map[string]any) {
	ctx = context.WithoutCancel(ctx)
	if out.CostMicros != 0 {
		outcome["cost_micros"], outcome["cost_unit"] = out.CostMicros, out.CostUnit
		if err := ip.chargeSpent(ctx, d, out); err != nil && ip.opts.Log != nil {
			ip.opts.Log.Error("charging the call's cost failed", "plugin", name, "invocation", id, "err", err)
		}
	}
	if d.grant != nil {
		outcome["grant_id"] = d.grant.ID
	}
	if ip.opts.Ledger == nil {
		return
	}
	vs, err := ip.opts.Ledger.Violations(ctx, id)
	if err != nil {
		// Unknown is not clean: the outcome says it could not be checked.
		outcome["violations_unchecked"] = true
		return
	}
	if len(vs) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, v := range vs {
		if !seen[v.Kind] {
			seen[v.Kind] = true
			out.Violations = append(out.Violations, v.Kind)
		}
	}
	out.Violated = true
	if out.Status == CallSucceeded {
		// The plugin says it succeeded; what it did past its authority
		// makes that claim worth nothing.
		out.Status, out.Reason = CallPartial, "the plugin tried to use authority it was not given: "+joinKinds(out.Violations)
	}
	outcome["violated"], outcome["violations"], outcome["reaction"] = true, out.Violations, reaction(d.policy.OnViolation)
	if d.policy.OnViolation == policy.OnViolationQuarantine && ip.host != nil {
		if err := ip.host.Quarantine(ctx, name, id, out.Violations); err != nil && ip.opts.Log != nil {
			ip.opts.Log.Error("quarantine failed", "plugin", name, "err", err)
		}
	}
}

func reaction(r string) string {
	if r == "" {
		return policy.OnViolationRefuse
	}
	return r
}

func joinKinds(kinds []string) string { return strings.Join(kinds, ", ") }
