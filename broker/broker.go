package broker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
)

// Options configure a Broker beyond its Config.
type Options struct {
	// Now is the broker's clock (time.Now when nil): handle deadlines,
	// and the secret cache's TTL and fresh-read interval.
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics
	// Leases serves the intents bound to a leased secret (source
	// vault_lease); nil: their secrets are unavailable.
	Leases LeasedSecrets
}

// Broker mints, resolves and revokes handles and fetches the secrets
// behind them.
type Broker struct {
	cfg     Config
	store   Store
	secrets *SecretCache
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics
	leases  LeasedSecrets
	// intents are cfg.Intents until SetIntents replaces them (a reload).
	intents atomic.Pointer[map[string]Intent]
	owed    owedLedger // revocations the store has not acknowledged
}

// New returns a Broker. cfg must have passed Validate (after WithDefaults).
func New(cfg Config, store Store, secrets *SecretCache, opts Options) *Broker {
	if opts.Now == nil {
		opts.Now = time.Now
	} else if secrets != nil {
		secrets.useClock(opts.Now)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if isNilPointer(opts.Leases) {
		opts.Leases = nil // a nil manager in the interface is no manager
	}
	b := &Broker{cfg: cfg, store: store, secrets: secrets, now: opts.Now, log: opts.Logger, metrics: opts.Metrics,
		leases: opts.Leases}
	b.intents.Store(&cfg.Intents)
	return b
}

// IssueRequest asks for a handle. The host fills it from the invocation
// in flight and the plugin's installed manifest; only Intent came from the
// plugin.
type IssueRequest struct {
	PluginID     string
	InvocationID string
	Intent       string
	// Destinations the plugin's manifest declared for this intent.
	Destinations []Destination
	Deadline     time.Time // the invocation deadline
	DryRun       bool
	// Pass asks for a plugin pass instead of a handle (see IssuePass):
	// Intent stays empty; Destinations, or when none the bindings of
	// PassIntents, are where the pass may open tunnels.
	Pass        bool
	PassIntents []string
	// Renew, with Pass, is a pass the caller holds (for PluginID): it is
	// renewed for broker.pass_ttl instead of a new one being minted.
	Renew string

	// The decision point's context, carried by the handle to the proxy
	// (a pass carries none: the requests in its tunnels carry handles).
	// RunID and AccessGrantID name the run and the access grant the call
	// runs under: with an AccessGrantID the proxy refuses every request
	// once the grant is revoked or past its NotAfter (grant_revoked).
	RunID         string
	AccessGrantID string
	// Budget lists the budgets the proxy charges the handle's egress to
	// (typically the invocation's, the run's and the grant's): each
	// request counts one egress_requests before it is sent, and its
	// request and response body bytes count egress_bytes after; all lines
	// or none.
	Budget []BudgetLine
	// Residency lists the regions the handle may reach (empty: no
	// limit). Issue refuses an intent whose region is not listed (or that
	// has none) with ErrResidencyViolation; the proxy refuses a request
	// to a destination of another region.
	Residency []string
	// OnViolation: OnViolationRefuse (the default), OnViolationEnd or
	// OnViolationQuarantine.
	OnViolation string
}

// Issued is a minted handle. Handle goes to the plugin and nowhere else.
type Issued struct {
	Handle      string
	ExpiresAt   time.Time
	EgressProxy string
	Fingerprint string
}

// Issue mints a handle for req.
func (b *Broker) Issue(ctx context.Context, req IssueRequest) (Issued, error) {
	if req.Pass {
		return b.issuePass(ctx, req)
	}
	iss, err := b.issue(ctx, req)
	if err != nil {
		reason, _ := Reason(err)
		b.metrics.issueError(reason)
		return Issued{}, err
	}
	b.metrics.issue(req.Intent)
	b.log.Info("handle issued", "plugin", req.PluginID, "invocation", req.InvocationID, "intent", req.Intent,
		"handle_fp", iss.Fingerprint, "expires_at", iss.ExpiresAt.UTC().Format(time.RFC3339))
	return iss, nil
}

// Bounds of an issue request: every field and list the broker stores in a
// grant and the proxy walks per request.
const (
	MaxIDBytes          = 256 // plugin id, invocation id, intent name
	MaxDestinations     = 64
	MaxDestinationBytes = 1024 // host plus path prefix of one destination
	MaxMethods          = 16
	MaxMethodBytes      = 20 // longest registered HTTP method: 17 bytes
)

func (b *Broker) issue(ctx context.Context, req IssueRequest) (Issued, error) {
	if err := checkIDs(req); err != nil {
		return Issued{}, err
	}
	onViolation, err := checkDecision(req)
	if err != nil {
		return Issued{}, err
	}
	in, ok := b.intent(req.Intent)
	if !ok {
		return Issued{}, ErrIntentUnknown
	}
	if !ResidencyAllows(req.Residency, in.Region) {
		// The intent's region is the operator's, not the plugin's, but
		// the residency's contents stay out of the error all the same.
		return Issued{}, fmt.Errorf("%w: the intent's region is not in the residency", ErrResidencyViolation)
	}
	if len(req.Destinations) == 0 {
		// A requester without declared destinations (an Executa plugin)
		// gets the intent binding's own.
		req.Destinations = in.Destinations
	}
	if len(req.Destinations) == 0 {
		return Issued{}, fmt.Errorf("%w: no declared destination", ErrBadRequest)
	}
	if in.Secret.Source == "" {
		return Issued{}, fmt.Errorf("intent %q: %w", req.Intent, ErrIntentUnbound)
	}
	now := b.now()
	if !req.Deadline.After(now) {
		return Issued{}, ErrDeadlinePassed
	}
	if req.DryRun && in.Class != ClassRead {
		return Issued{}, ErrDryRunWrite
	}
	dests, err := normalizeAll(req.Destinations)
	if err != nil {
		return Issued{}, err
	}
	expires := req.Deadline
	if capAt := now.Add(b.cfg.MaxHandleLifetime); capAt.Before(expires) {
		expires = capAt
	}
	return b.put(ctx, &Grant{PluginID: req.PluginID, InvocationID: req.InvocationID, Intent: req.Intent, Class: in.Class,
		Destinations: dests, DryRun: req.DryRun, IssuedAt: now, ExpiresAt: expires,
		RunID: req.RunID, AccessGrantID: req.AccessGrantID, Budget: slices.Clone(req.Budget), Residency: slices.Clone(req.Residency),
		OnViolation: onViolation})
}

// checkIDs bounds the identifiers and lists of an issue request: every
// field and list the broker stores in a grant and the proxy walks per
// request.
func checkIDs(req IssueRequest) error {
	switch {
	case req.PluginID == "" || len(req.PluginID) > MaxIDBytes:
		return fmt.Errorf("%w: plugin id: required, at most %d bytes", ErrBadRequest, MaxIDBytes)
	case req.InvocationID == "" || len(req.InvocationID) > MaxIDBytes:
		return fmt.Errorf("%w: invocation id: required, at most %d bytes", ErrBadRequest, MaxIDBytes)
	case len(req.Intent) > MaxIDBytes:
		return fmt.Errorf("%w: intent: at most %d bytes", ErrBadRequest, MaxIDBytes)
	case len(req.Destinations) > MaxDestinations:
		return fmt.Errorf("%w: destinations: at most %d", ErrBadRequest, MaxDestinations)
	case len(req.PassIntents) > MaxDestinations:
		return fmt.Errorf("%w: pass intents: at most %d", ErrBadRequest, MaxDestinations)
	case len(req.Renew) > MaxIDBytes:
		return fmt.Errorf("%w: renew: at most %d bytes", ErrBadRequest, MaxIDBytes)
	}
	for i, in := range req.PassIntents {
		if len(in) > MaxIDBytes {
			return fmt.Errorf("%w: pass intents[%d]: at most %d bytes", ErrBadRequest, i, MaxIDBytes)
		}
	}
	for i, d := range req.Destinations {
		if len(d.Host)+len(d.PathPrefix) > MaxDestinationBytes || len(d.Methods) > MaxMethods {
			return fmt.Errorf("%w: destinations[%d]: host and path prefix at most %d bytes, at most %d methods",
				ErrBadRequest, i, MaxDestinationBytes, MaxMethods)
		}
		for _, m := range d.Methods {
			if len(m) > MaxMethodBytes {
				return fmt.Errorf("%w: destinations[%d]: a method is at most %d bytes", ErrBadRequest, i, MaxMethodBytes)
			}
		}
	}
	return nil
}

// normalizeAll normalizes requested destinations.
func normalizeAll(ds []Destination) ([]Destination, error) {
	out := make([]Destination, 0, len(ds))
	for i, d := range ds {
		n, err := d.Normalize()
		if err != nil {
			return nil, fmt.Errorf("%w: destinations[%d]: %v", ErrBadRequest, i, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// put mints a handle for g and stores it.
func (b *Broker) put(ctx context.Context, g *Grant) (Issued, error) {
	h, key, err := newHandle()
	if err != nil {
		return Issued{}, fmt.Errorf("mint handle: %w", err)
	}
	g.Fingerprint = key.Fingerprint()
	if err := b.store.Put(ctx, key, g, b.cfg.MaxHandlesPerInvocation); err != nil {
		return Issued{}, err
	}
	return Issued{Handle: h, ExpiresAt: g.ExpiresAt, EgressProxy: b.cfg.EgressProxy, Fingerprint: g.Fingerprint}, nil
}

// Resolve returns the grant a handle stands for. On ErrHandleExpired and
// ErrHandleRevoked the grant is returned too, for the audit log; callers
// facing a plugin must treat every error alike. A store failure fails
// closed (ErrStoreUnavailable).
func (b *Broker) Resolve(ctx context.Context, handle string) (*Grant, error) {
	g, err := b.resolve(ctx, handle)
	b.metrics.resolve(err)
	return g, err
}

func (b *Broker) resolve(ctx context.Context, handle string) (*Grant, error) {
	key, ok := ParseHandle(handle)
	if !ok {
		return nil, ErrHandleUnknown
	}
	return b.resolveKey(ctx, key)
}

func (b *Broker) resolveKey(ctx context.Context, key HandleKey) (*Grant, error) {
	g, err := b.store.Get(ctx, key)
	if err != nil {
		return g, err
	}
	if b.owed.covers(g) {
		// Revoked here; the store does not know yet.
		return g, ErrHandleRevoked
	}
	if !b.now().Before(g.ExpiresAt) {
		return g, ErrHandleExpired
	}
	return g, nil
}

// RevokeInvocation revokes every handle of the invocation, on every
// replica sharing the store, and refuses new ones for it; then it ends
// the invocation's leases (see EndInvocation). ErrRevocationOwed: the
// store did not acknowledge it (see EndInvocation).
func (b *Broker) RevokeInvocation(ctx context.Context, invocationID string) (int, error) {
	end, owed, err := b.endInvocation(ctx, invocationID)
	if owed != nil {
		err = owed
	}
	return end.Handles, err
}

// EndInvocation is RevokeInvocation saying what it revoked: the handles,
// and the leases (LeasedSecrets.End). The leases end even when the handles'
// revocation failed: the credentials behind them then die at the
// upstream all the same. A handle revocation the store did not
// acknowledge is owed (HandlesOwed): kept, enforced on this replica at
// once and retried until it lands or the handles have expired. Ending
// twice is harmless: the second finds nothing.
func (b *Broker) EndInvocation(ctx context.Context, invocationID string) (InvocationEnd, error) {
	end, _, err := b.endInvocation(ctx, invocationID)
	return end, err
}

// endInvocation is EndInvocation, with the error its handles' revocation
// is owed for (ErrRevocationOwed, wrapping the store's), if it is.
func (b *Broker) endInvocation(ctx context.Context, invocationID string) (end InvocationEnd, owed, err error) {
	at := b.now()
	n, serr := b.store.RevokeInvocation(ctx, invocationID)
	var lerr error
	if b.leases != nil {
		if end.Leases, lerr = b.leases.End(ctx, invocationID); lerr != nil {
			b.log.Error("ending the invocation's leases", "invocation", invocationID, "err", lerr)
		}
	}
	if serr != nil {
		end.HandlesOwed = true
		return end, b.owe(owedInvocation, invocationID, at, serr), nil
	}
	end.Handles = n
	b.metrics.revoke("invocation", n)
	b.log.Info("invocation handles revoked", "invocation", invocationID, "handles", n, "leases", len(end.Leases))
	return end, nil, lerr
}

// Metrics is the broker's metrics (nil-safe; nil when none were given):
// the API server counts the tokens it mints there.
func (b *Broker) Metrics() *Metrics { return b.metrics }

// Leases is the lease manager (nil when none is configured).
func (b *Broker) Leases() LeasedSecrets { return b.leases }

// RevokePlugin revokes every handle and pass the plugin holds now.
// ErrRevocationOwed: the store did not acknowledge it; this replica
// refuses them at once and retries.
func (b *Broker) RevokePlugin(ctx context.Context, pluginID string) (int, error) {
	at := b.now()
	n, err := b.store.RevokePlugin(ctx, pluginID, at)
	if err != nil {
		return 0, b.owe(owedPlugin, pluginID, at, err)
	}
	b.metrics.revoke("plugin", n)
	b.log.Info("plugin handles revoked", "plugin", pluginID, "handles", n)
	return n, nil
}

// Intent returns the binding of a configured intent.
func (b *Broker) Intent(name string) (Intent, bool) {
	return b.intent(name)
}

// Secret fetches the secret behind g's intent through the cache; fresh
// bypasses the cache. Errors name the intent, never the secret's path or
// value.
func (b *Broker) Secret(ctx context.Context, g *Grant, fresh bool) (Secret, error) {
	if g.Pass {
		return Secret{}, fmt.Errorf("%w: a plugin pass grants no secret", ErrIntentUnbound)
	}
	if in, ok := b.intent(g.Intent); ok && in.Secret.Source == SourceVaultLease {
		// The invocation's own lease, the same on every retry: fresh
		// changes nothing.
		if b.leases == nil {
			return Secret{}, fmt.Errorf("intent %q: %w: no lease manager", g.Intent, ErrLeaseUnavailable)
		}
		fields, fp, err := b.leases.Fields(ctx, g)
		if err != nil {
			return Secret{}, fmt.Errorf("intent %q: %w", g.Intent, err)
		}
		s, err := secretOf(g.Intent, in, SecretData{Fields: fields})
		s.Lease = fp
		return s, err
	}
	return b.SecretFor(ctx, g.Intent, fresh)
}

// SecretFor fetches the secret bound to a configured intent. A leased
// secret needs an invocation (Secret): ErrLeaseNeedsInvocation.
func (b *Broker) SecretFor(ctx context.Context, intent string, fresh bool) (Secret, error) {
	in, ok := b.intent(intent)
	if !ok {
		return Secret{}, ErrIntentUnknown
	}
	if in.Secret.Source == SourceVaultLease {
		return Secret{}, fmt.Errorf("intent %q: %w", intent, ErrLeaseNeedsInvocation)
	}
	data, err := b.secrets.Get(ctx, in.Secret, fresh)
	if err != nil {
		return Secret{}, fmt.Errorf("intent %q: %w", intent, err)
	}
	s, err := secretOf(intent, in, data)
	if err == nil {
		b.metrics.version(intent, data.Version)
	}
	return s, err
}

// secretOf picks what the proxy injects out of a secret's fields.
func secretOf(intent string, in Intent, data SecretData) (Secret, error) {
	v, ok := data.Fields[in.Secret.Field]
	if !ok || v == "" {
		return Secret{}, fmt.Errorf("intent %q: %w (field %q)", intent, ErrSecretFieldMissing, in.Secret.Field)
	}
	s := Secret{Value: v, Version: data.Version, Fields: data.Fields}
	if in.Inject.Kind != nil {
		var err error
		if s, err = in.Inject.Kind.CompleteSecret(s); err != nil {
			return Secret{}, fmt.Errorf("intent %q: %w", intent, err)
		}
	}
	return s, nil
}

// RefreshSecrets makes the next fetch of every secret read its source.
func (b *Broker) RefreshSecrets() {
	b.secrets.invalidate()
	b.log.Info("secret cache invalidated")
}

// Ping checks the handle store.
func (b *Broker) Ping(ctx context.Context) error { return b.store.Ping(ctx) }

// Ledger is the decision point's shared state in the handle store (both
// stores implement it); nil when the store does not.
func (b *Broker) Ledger() Ledger {
	l, _ := b.store.(Ledger)
	return l
}

// Store is the handle store (the Redis one also enforces global rates).
func (b *Broker) Store() Store { return b.store }
