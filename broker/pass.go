package broker

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// DefaultMaxPassLifetime is how long a plugin pass lives at most when the
// host revokes it no sooner (it revokes it when the plugin exits).
const DefaultMaxPassLifetime = 7 * 24 * time.Hour

// A plugin pass is what the host puts in a plugin's HTTPS_PROXY userinfo
// when the proxy intercepts CONNECT: it names the plugin to the proxy so
// that a CONNECT whose handle travels only inside the tunnel (placeholder
// intents) can be attributed before a certificate is minted. It grants no
// secret: the proxy accepts it on a CONNECT, to a host and port its
// destinations declare, and refuses it everywhere else. It has the
// handle's shape (so logs and the echo guard treat it as one), lives
// until the host revokes the plugin's handles when the plugin exits, and
// at most broker.max_pass_lifetime.
func (b *Broker) issuePass(ctx context.Context, req IssueRequest) (Issued, error) {
	iss, err := b.pass(ctx, req)
	if err != nil {
		reason, _ := reasonOf(err)
		b.metrics.issueError(reason)
		return Issued{}, err
	}
	b.metrics.issue("(pass)")
	b.log.Info("plugin pass issued", "plugin", req.PluginID, "handle_fp", iss.Fingerprint,
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
			in, ok := b.cfg.Intents[name]
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
	expires := now.Add(b.cfg.MaxPassLifetime)
	if !req.Deadline.IsZero() {
		if !req.Deadline.After(now) {
			return Issued{}, ErrDeadlinePassed
		}
		if req.Deadline.Before(expires) {
			expires = req.Deadline
		}
	}
	return b.put(ctx, &Grant{PluginID: req.PluginID, InvocationID: req.InvocationID, Pass: true,
		Destinations: dests, IssuedAt: now, ExpiresAt: expires})
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
