package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/airlock-dev/airlock/broker"
)

// Manager serves the intents bound to a leased secret (source vault_lease):
// a Vault path whose answer carries a lease, such as a RabbitMQ or
// database role's creds, or a PKI role with generate_lease.
//
// One lease per invocation and intent: it is obtained at the first use of
// a handle of the invocation (never at issue, so dry runs and unused
// handles cost nothing), shared by every handle of the invocation on every
// replica (the first replica to claim the store's key wins; a replica that
// lost the race revokes the lease it obtained), renewed while the
// invocation outlives it, and revoked when the invocation ends (End, from
// RevokeInvocation) or, when no one said so, at its deadline.
//
// # Security
//
// The lease id and the credentials are sealed (AES-256-GCM, bound to the
// record's key) in the store; logs, metrics and audit lines carry the
// lease's fingerprint only.
//
// # Concurrency
//
// Safe for concurrent use. Run does the renewals, deadline revocations and
// revocation retries until its context ends.
type Manager struct {
	vault     *vaultapi.Client
	store     broker.LeaseStore
	seal      *sealer
	cfg       broker.LeasesConfig
	names     []string // the leased intents
	intents   map[string]broker.Intent
	tombstone time.Duration // how long an ended lease's record refuses a new claim
	now       func() time.Time
	log       *slog.Logger
	metrics   *metrics
	// OnAuthError is called when Vault refuses the token (403); may be nil.
	onAuthError func()

	sf      singleflight.Group
	mu      sync.Mutex
	held    map[string]*heldLease    // records in use on this replica
	tracked map[string]*trackedLease // obtained here and live, or being revoked by this replica
}

var _ broker.LeasedSecrets = (*Manager)(nil)

// heldLease is an open record: what a request needs.
type heldLease struct {
	rec leaseRecord
	raw []byte // as stored: the compare value of a renewal
	sec leaseSecret
}

// trackedLease is a lease this replica must still act on.
type trackedLease struct {
	tk          string // its key in tracked
	key, intent string
	id, fp      string
	expires     time.Time // at Vault
	deadline    time.Time
	// revoking: this replica ended the record and owes Vault the
	// revocation; otherwise it obtained the lease and renews it, and ends
	// it at the deadline.
	revoking bool
	attempts int
	nextTry  time.Time
	failing  bool      // attempts used up; retried slowly until expires
	checked  time.Time // obtained leases: when the record was last read
	raw      []byte    // revoking: the owed record in the store (nil: none holds it)
}

// Options configure New.
type Options struct {
	Now         func() time.Time
	Logger      *slog.Logger
	Registerer  prometheus.Registerer // nil: no metrics
	OnAuthError func()
}

// New returns the lease manager for cfg's leased intents (cfg after
// WithDefaults and Validate), reading Vault with vc and agreeing with the
// other replicas through store. The caller runs Run.
func New(cfg broker.Config, vc *vaultapi.Client, store broker.LeaseStore, opts Options) (*Manager, error) {
	lc := cfg.Leases.WithDefaults()
	seal, err := newSealer(lc.SealKeyFile)
	if err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Manager{vault: vc, store: store, seal: seal, cfg: lc, names: cfg.LeasedIntents(), intents: map[string]broker.Intent{},
		tombstone: cfg.MaxHandleLifetime + cfg.ExpiredRetention, now: opts.Now, log: opts.Logger,
		onAuthError: opts.OnAuthError, held: map[string]*heldLease{}, tracked: map[string]*trackedLease{}}
	for _, n := range l.names {
		l.intents[n] = cfg.Intents[n]
	}
	if opts.Registerer != nil {
		l.metrics = newMetrics(opts.Registerer)
		l.metrics.register(opts.Registerer, l)
	}
	return l, nil
}

// Outstanding is how many leases this replica obtained and has not seen
// revoked, plus the revocations it still owes.
func (l *Manager) Outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tracked)
}

// Failing is how many revocations used all their attempts while the
// lease is still alive at Vault.
func (l *Manager) Failing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, t := range l.tracked {
		if t.failing {
			n++
		}
	}
	return n
}

// Check is a readiness check: it fails while FailingWarning revocations
// or more are failing.
func (l *Manager) Check(context.Context) error {
	if n := l.Failing(); n >= l.cfg.FailingWarning {
		return fmt.Errorf("%d lease revocations are failing; the leases die at their Vault TTL", n)
	}
	return nil
}

// Fields implements LeasedSecrets.
func (l *Manager) Fields(ctx context.Context, g *broker.Grant) (map[string]string, string, error) {
	key := leaseKey(g.InvocationID, g.Intent)
	l.mu.Lock()
	h := l.held[key]
	l.mu.Unlock()
	if h == nil {
		// One obtain per key on this replica; it outlives a caller that
		// leaves, so the lease it makes is recorded (and revoked later).
		v, err, _ := l.sf.Do(key, func() (any, error) {
			octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broker.DefaultReadTimeout)
			defer cancel()
			return l.acquire(octx, key, g)
		})
		if err != nil {
			return nil, "", err
		}
		h = v.(*heldLease)
	}
	l.maybeRenew(ctx, key, h)
	return h.sec.Data, h.rec.Fingerprint, nil
}

// acquire adopts the invocation's lease from the store, or obtains one
// and claims the key for it.
func (l *Manager) acquire(ctx context.Context, key string, g *broker.Grant) (*heldLease, error) {
	raw, err := l.store.LoadLease(ctx, key)
	if err != nil {
		return nil, err
	}
	if raw != nil {
		return l.adopt(key, raw)
	}
	in := l.intents[g.Intent]
	octx, endSpan := leaseSpan(ctx, SpanObtain, g.Intent, g.InvocationID)
	s, err := l.obtain(octx, in)
	if err != nil {
		endSpan("", true)
	} else {
		endSpan(fingerprint(s.LeaseID), false)
	}
	l.metrics.obtain(g.Intent, err)
	if err != nil {
		l.log.Warn("lease not obtained", "intent", g.Intent, "invocation", g.InvocationID, "err", err)
		return nil, err
	}
	now := l.now()
	fp := fingerprint(s.LeaseID)
	sec := leaseSecret{ID: s.LeaseID, Data: stringFields(s.Data)}
	sealed, err := l.seal.seal(key, sec)
	if err != nil {
		l.revokeLater(key, g.Intent, sec.ID, fp, now.Add(time.Duration(s.LeaseDuration)*time.Second))
		return nil, fmt.Errorf("seal lease: %w", err)
	}
	rec := leaseRecord{State: leaseActive, PluginID: g.PluginID, Fingerprint: fp, Sealed: sealed, ObtainedAt: now,
		ExpiresAt: now.Add(time.Duration(s.LeaseDuration) * time.Second), Deadline: g.ExpiresAt, Renewable: s.Renewable}
	b := encodeLease(rec)
	stored, won, err := l.store.ClaimLease(ctx, key, b, rec.Deadline, l.recordTTL(rec))
	if err != nil || !won {
		// Another replica's lease serves the invocation (or the store
		// cannot say): this one must not live on.
		if err == nil {
			l.metrics.revocation("lost_race")
		}
		l.revokeLater(key, g.Intent, sec.ID, fp, rec.ExpiresAt)
		if err != nil {
			return nil, err
		}
		return l.adopt(key, stored)
	}
	l.mu.Lock()
	l.tracked[key] = &trackedLease{tk: key, key: key, intent: g.Intent, id: sec.ID, fp: fp, expires: rec.ExpiresAt, deadline: rec.Deadline}
	l.mu.Unlock()
	l.log.Info("lease obtained", "intent", g.Intent, "invocation", g.InvocationID, "lease_fp", fp,
		"ttl", time.Duration(s.LeaseDuration)*time.Second, "renewable", s.Renewable)
	return l.hold(key, rec, b, sec), nil
}

// adopt opens a stored record for use on this replica.
func (l *Manager) adopt(key string, raw []byte) (*heldLease, error) {
	rec, err := decodeLease(raw)
	if err != nil {
		return nil, err
	}
	if rec.State != leaseActive {
		return nil, broker.ErrLeaseEnded
	}
	sec, err := l.seal.open(key, rec.Sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", broker.ErrLeaseUnavailable, err)
	}
	return l.hold(key, rec, raw, sec), nil
}

func (l *Manager) hold(key string, rec leaseRecord, raw []byte, sec leaseSecret) *heldLease {
	h := &heldLease{rec: rec, raw: raw, sec: sec}
	l.mu.Lock()
	l.held[key] = h
	l.mu.Unlock()
	return h
}

// recordTTL keeps a record until its invocation's handles have expired
// and been forgotten, and at least as long as a tombstone.
func (l *Manager) recordTTL(rec leaseRecord) time.Duration {
	return max(rec.Deadline.Sub(l.now()), 0) + l.tombstone
}

// obtain asks Vault for a lease on in's path.
func (l *Manager) obtain(ctx context.Context, in broker.Intent) (*vaultapi.Secret, error) {
	if l.vault == nil {
		return nil, fmt.Errorf("%w: no Vault is configured", broker.ErrLeaseUnavailable)
	}
	path := in.Secret.Mount + "/" + in.Secret.Path
	var s *vaultapi.Secret
	var err error
	if len(in.Secret.Data) > 0 {
		data := make(map[string]any, len(in.Secret.Data))
		for k, v := range in.Secret.Data {
			data[k] = v
		}
		s, err = l.vault.Logical().WriteWithContext(ctx, path, data)
	} else {
		s, err = l.vault.Logical().ReadWithContext(ctx, path)
	}
	if err != nil {
		return nil, l.vaultError(err)
	}
	if s == nil || s.LeaseID == "" {
		return nil, fmt.Errorf("%w: the path answered without a lease", broker.ErrLeaseUnavailable)
	}
	return s, nil
}

// vaultError keeps the kind of a Vault failure, never what Vault sent.
func (l *Manager) vaultError(err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode == http.StatusForbidden && l.onAuthError != nil {
			l.onAuthError()
		}
		return fmt.Errorf("%w: Vault answered %d", broker.ErrLeaseUnavailable, re.StatusCode)
	}
	return fmt.Errorf("%w: %s", broker.ErrLeaseUnavailable, broker.VaultTransportError(err))
}

// stringFields keeps the string fields of a Vault answer.
func stringFields(data map[string]any) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
