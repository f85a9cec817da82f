package broker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// defaultPassTTL is how long a plugin pass lives after it is issued or
// renewed: the host renews it while the plugin runs, so a pass a crashed
// host could not revoke is dead within this time.
const defaultPassTTL = time.Hour

// A plugin pass is what the host puts in a plugin's HTTPS_PROXY userinfo
// when the proxy intercepts CONNECT: it names the plugin to the proxy so
// that a CONNECT whose handle travels only inside the tunnel (placeholder
// intents) can be attributed before a certificate is minted. It grants no
// secret: the proxy accepts it on a CONNECT, to a host and port its
// destinations declare, and refuses it everywhere else. It has the
// handle's shape (so logs and the echo guard treat it as one), lives
// broker.pass_ttl after it is issued or renewed (req.Renew), and the host
// revokes it with the plugin's handles when the plugin exits.
func (b *Broker) issuePass(ctx context.Context, req IssueRequest) (Issued, error) {
	mint, level, what := b.pass, slog.LevelInfo, "plugin pass issued"
	if req.Renew != "" {
		mint, level, what = b.renewPass, slog.LevelDebug, "plugin pass renewed"
	}
	iss, err := mint(ctx, req)
	if err != nil {
		reason, _ := Reason(err)
		b.metrics.issueError(reason)
		return Issued{}, err
	}
	if req.Renew == "" {
		b.metrics.issue("(pass)")
	}
	b.log.Log(ctx, level, what, "plugin", req.PluginID, "handle_fp", iss.Fingerprint,
		"expires_at", iss.ExpiresAt.UTC().Format(time.RFC3339))
	return iss, nil
}

func (b *Broker) pass(ctx context.Context, req IssueRequest) (Issued, error) {
	if err := checkIDs(req); err != nil {
		return Issued{}, err
	}
	if req.Intent != "" || req.DryRun {
		return Issued{}, fmt.Errorf("%w: a plugin pass has no intent and no dry run", ErrBadRequest)
	}
	ds := req.Destinations
	if len(ds) == 0 {
		for _, name := range req.PassIntents {
			in, ok := b.intent(name)
			if !ok {
				return Issued{}, ErrIntentUnknown
			}
			ds = append(ds, in.Destinations...)
		}
	}
	dests, err := normalizeAll(ds)
	if err != nil {
		return Issued{}, err
	}
	dests = Places(dests)
	if len(dests) == 0 || len(dests) > MaxDestinations {
		return Issued{}, fmt.Errorf("%w: a plugin pass needs between 1 and %d destinations", ErrBadRequest, MaxDestinations)
	}
	now := b.now()
	var until time.Time
	if b.cfg.MaxPassLifetime > 0 {
		until = now.Add(b.cfg.MaxPassLifetime)
	}
	if !req.Deadline.IsZero() {
		if !req.Deadline.After(now) {
			return Issued{}, ErrDeadlinePassed
		}
		if until.IsZero() || req.Deadline.Before(until) {
			until = req.Deadline
		}
	}
	g := &Grant{PluginID: req.PluginID, InvocationID: req.InvocationID, Pass: true,
		Destinations: dests, IssuedAt: now, RenewUntil: until}
	g.ExpiresAt = g.renewed(now, b.cfg.PassTTL)
	return b.put(ctx, g)
}

// renewed is when pass g expires if renewed at now for ttl.
func (g *Grant) renewed(now time.Time, ttl time.Duration) time.Time {
	t := now.Add(ttl)
	if !g.RenewUntil.IsZero() && g.RenewUntil.Before(t) {
		t = g.RenewUntil
	}
	return t
}

// renewPass moves the expiry of req.Renew, a live pass of req.PluginID,
// to pass_ttl from now (never past its RenewUntil). Any other handle, a
// pass of another plugin, a revoked or expired one: ErrHandleUnknown,
// ErrHandleRevoked or ErrHandleExpired, and the host stops renewing.
func (b *Broker) renewPass(ctx context.Context, req IssueRequest) (Issued, error) {
	if err := checkIDs(req); err != nil {
		return Issued{}, err
	}
	key, ok := ParseHandle(req.Renew)
	if !ok {
		return Issued{}, ErrHandleUnknown
	}
	g, err := b.resolveKey(ctx, key)
	if g != nil && (!g.Pass || g.PluginID != req.PluginID) {
		err = ErrHandleUnknown
	}
	if err != nil {
		return Issued{}, err
	}
	if next := g.renewed(b.now(), b.cfg.PassTTL); next.After(g.ExpiresAt) {
		ng := *g
		ng.ExpiresAt = next
		if err := b.store.Renew(ctx, key, &ng); err != nil {
			return Issued{}, err
		}
		g = &ng
	}
	return Issued{Handle: req.Renew, ExpiresAt: g.ExpiresAt, EgressProxy: b.cfg.EgressProxy, Fingerprint: g.Fingerprint}, nil
}

// Places returns the distinct host and port pairs of ds, in order: the
// part of a destination a CONNECT can be checked against.
func Places(ds []Destination) []Destination {
	var out []Destination
	for _, d := range ds {
		p := Destination{Host: d.Host, Port: d.Port}
		if !slices.ContainsFunc(out, func(e Destination) bool { return e.Host == p.Host && e.Port == p.Port }) {
			out = append(out, p)
		}
	}
	return out
}
