package proxy

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// The decision point's limits on a handle's egress (the fields the host
// put in its grant; a handle without them pays for none of this):
//   - residency: a request to a destination whose region (the intent
//     binding destination's, else the binding's) is not in the handle's
//     residency is refused 403 residency_violation;
//   - access grant: a handle issued under an access grant is refused 403
//     grant_revoked once the grant is revoked or past its NotAfter (one
//     ledger read per request);
//   - budgets: each request counts one egress_requests on every budget
//     line before it is sent (refused 429 budget_exhausted, naming the
//     budget and dimension, when a line would go over; nothing counted),
//     and the request and response body bytes relayed count egress_bytes
//     after the exchange, without a limit check, so the requests after
//     the one that spent the last byte are refused. The ledger unreachable: 503
//     budget_unavailable, for handles with budget lines only;
//   - violations: a refusal that is a plugin's attempt to use authority
//     it was not given is recorded in the ledger (broker.Violation) under
//     the handle's invocation and plugin, and with on_violation end or
//     quarantine the handle's invocation is revoked at once.

// ledgerTimeout bounds one ledger call the proxy makes off a request's
// own context (a charge after the exchange, a violation).
const ledgerTimeout = 10 * time.Second

// invocationRevoker is what the proxy needs to end an invocation's
// egress after a violation (the broker's RevokeInvocation).
type invocationRevoker interface {
	RevokeInvocation(ctx context.Context, invocationID string) (int, error)
}

// storeOwner is a broker that exposes its handle store (*broker.Broker).
type storeOwner interface{ Store() broker.Store }

// ledgerOf is the ledger the proxy uses: the given one, else the
// broker's handle store when it keeps the ledger (airlock serve: the
// same store the broker issues from).
func ledgerOf(given broker.Ledger, b Broker) broker.Ledger {
	if given != nil {
		return given
	}
	if so, ok := b.(storeOwner); ok {
		if l, ok := so.Store().(broker.Ledger); ok {
			return l
		}
	}
	return nil
}

// violationKinds are the denial codes that record a violation, with the
// violation's kind.
var violationKinds = map[string]string{
	CodeDestination:          "destination_not_declared",
	CodeHandleNotThisPlugins: "handle_other_plugin",
	CodeHandleInRequest:      "handle_in_request",
	CodeResidency:            "residency_violation",
	CodeBudgetExhausted:      "budget_exhausted",
}

// checkResidency refuses a request to t outside g's residency.
func checkResidency(g *broker.Grant, in broker.Intent, t target) *denial {
	if len(g.Residency) == 0 {
		return nil
	}
	region := in.RegionOf(t.host, t.port, t.path)
	if broker.ResidencyAllows(g.Residency, region) {
		return nil
	}
	reason := "the destination names no region"
	if region != "" {
		reason = "region " + strconv.Quote(region) + " is not in the handle's residency"
	}
	return deny(CodeResidency, "the destination's region is outside the handle's residency").withReason(reason)
}

// checkAccessGrant refuses a request under an access grant that is no
// longer live.
func (s *Server) checkAccessGrant(ctx context.Context, g *broker.Grant, now time.Time) *denial {
	if g.AccessGrantID == "" {
		return nil
	}
	if s.ledger == nil {
		return deny(CodeStoreUnavailable, "the access grant cannot be checked; try again").withReason("no ledger")
	}
	ag, err := s.ledger.GetAccessGrant(ctx, g.AccessGrantID)
	switch {
	case errors.Is(err, broker.ErrGrantUnknown):
		return deny(CodeGrantRevoked, "the access grant this call runs under was revoked or has lapsed").withReason("access grant unknown")
	case err != nil:
		return deny(CodeStoreUnavailable, "the access grant cannot be checked; try again").withReason(err.Error())
	case !ag.RevokedAt.IsZero():
		return deny(CodeGrantRevoked, "the access grant this call runs under was revoked or has lapsed").withReason("access grant revoked")
	case !now.Before(ag.NotAfter):
		return deny(CodeGrantRevoked, "the access grant this call runs under was revoked or has lapsed").withReason("access grant past its not_after")
	}
	return nil
}

// chargeRequest counts one egress request on every budget line of g, or
// refuses it.
func (s *Server) chargeRequest(ctx context.Context, g *broker.Grant) *denial {
	if len(g.Budget) == 0 {
		return nil
	}
	if s.ledger == nil {
		return deny(CodeBudgetUnavailable, "the budget ledger is unavailable; try again").withReason("no ledger")
	}
	// Only the egress dimensions: calls and cost are the host's. A charge
	// checks only the dimensions it adds to, so the bytes, charged after
	// each exchange, are checked first by a charge of nothing (refused
	// once a line has none left); then the request is charged.
	var bytes, requests []broker.BudgetLine
	for _, l := range g.Budget {
		if l.Limits.EgressBytes > 0 {
			bytes = append(bytes, broker.BudgetLine{Key: l.Key, Limits: broker.Limits{EgressBytes: l.Limits.EgressBytes}})
		}
		requests = append(requests, broker.BudgetLine{Key: l.Key, Limits: broker.Limits{EgressRequests: l.Limits.EgressRequests}})
	}
	var err error
	if len(bytes) > 0 {
		err = s.ledger.Charge(ctx, bytes, broker.Spend{})
	}
	if err == nil {
		err = s.ledger.Charge(ctx, requests, broker.Spend{EgressRequests: 1})
	}
	var be *broker.BudgetExhaustedError
	switch {
	case errors.As(err, &be):
		d := deny(CodeBudgetExhausted, "the budget "+be.Key+" has no "+be.Dimension+" left").withReason(be.Error())
		d.budget, d.dimension = be.Key, be.Dimension
		return d
	case err != nil:
		return deny(CodeBudgetUnavailable, "the budget ledger is unavailable; try again").withReason(err.Error())
	}
	return nil
}

// chargeBytes counts n relayed bytes on every budget line of g, without
// a limit check: the exchange has happened.
func (s *Server) chargeBytes(g *broker.Grant, n int64) {
	if len(g.Budget) == 0 || n <= 0 || s.ledger == nil {
		return
	}
	lines := make([]broker.BudgetLine, len(g.Budget))
	for i, l := range g.Budget {
		lines[i] = broker.BudgetLine{Key: l.Key}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if err := s.ledger.Charge(ctx, lines, broker.Spend{EgressBytes: n}); err != nil {
		s.log.Warn("proxy: egress bytes could not be charged", "invocation", g.InvocationID, "handle_fp", g.Fingerprint,
			"bytes", n, "error", err.Error())
	}
}

// violation records that g was used for what it does not allow (kind),
// under its invocation and plugin, and under presentedBy, another plugin
// that presented it; with on_violation end or quarantine it revokes g's
// invocation, so no later request of it gets out.
func (s *Server) violation(g *broker.Grant, kind, presentedBy string) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	at := time.Now()
	s.log.Warn("proxy: violation", "kind", kind, "plugin", g.PluginID, "invocation", g.InvocationID, "handle_fp", g.Fingerprint,
		"presented_by", presentedBy, "on_violation", g.OnViolation)
	recorded := s.ledger != nil
	if s.ledger != nil {
		vs := []broker.Violation{{InvocationID: g.InvocationID, PluginID: g.PluginID, Kind: kind, At: at}}
		if presentedBy != "" && presentedBy != g.PluginID {
			vs = append(vs, broker.Violation{PluginID: presentedBy, Kind: kind, At: at})
		}
		for _, v := range vs {
			if err := s.ledger.RecordViolation(ctx, v); err != nil {
				recorded = false
				s.log.Error("proxy: a violation could not be recorded", "kind", kind, "plugin", v.PluginID,
					"invocation", v.InvocationID, "error", err.Error())
			}
		}
	}
	s.metrics.violation(kind, recorded)
	if g.OnViolation != broker.OnViolationEnd && g.OnViolation != broker.OnViolationQuarantine {
		return
	}
	if s.revoker == nil {
		s.log.Error("proxy: on_violation asks to end the invocation, but the proxy cannot revoke", "invocation", g.InvocationID)
		return
	}
	// An owed revocation is already enforced on this replica.
	if _, err := s.revoker.RevokeInvocation(ctx, g.InvocationID); err != nil && !errors.Is(err, broker.ErrRevocationOwed) {
		s.log.Error("proxy: the violating invocation could not be revoked", "invocation", g.InvocationID, "error", err.Error())
	}
}

// countedBody counts the request body bytes read from it (sent upstream).
type countedBody struct {
	rc io.ReadCloser
	n  *atomic.Int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countedBody) Close() error { return c.rc.Close() }
