package lease

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// End ends the invocation's leases, on every replica: each record is
// swapped for a tombstone (so no replica claims a new lease for the
// invocation), and the replica that swapped a live one revokes it at
// Vault (sys/leases/revoke, synchronous: when it returns, the secrets
// engine has deleted the credential). A failed revocation is retried in
// the background with backoff.
func (l *Manager) End(ctx context.Context, invocationID string) ([]broker.LeaseEnd, error) {
	var out []broker.LeaseEnd
	var errs []error
	for _, name := range l.names {
		end, err := l.endKey(ctx, leaseKey(invocationID, name), name)
		if err != nil {
			errs = append(errs, err)
		}
		if end != nil {
			out = append(out, *end)
		}
	}
	return out, errors.Join(errs...)
}

func (l *Manager) endKey(ctx context.Context, key, intent string) (*broker.LeaseEnd, error) {
	// The record is swapped for one that says the lease is ended and its
	// revocation owed, keeping the sealed lease id, so that no replica
	// claims a new lease for the invocation and any replica can finish
	// the revocation should this one be gone (it stays on the due list
	// until it lands). A record that changed between the load and the
	// swap only costs the tombstone its fingerprint.
	now := l.now()
	tomb := leaseRecord{State: leaseEnded}
	ttl := l.tombstone
	cur, lerr := l.store.LoadLease(ctx, key)
	if lerr == nil && cur != nil {
		if r, err := decodeLease(cur); err == nil {
			tomb.Fingerprint, tomb.ObtainedAt, tomb.ExpiresAt = r.Fingerprint, r.ObtainedAt, r.ExpiresAt
			if r.State == leaseActive || r.State == leaseRevoking {
				tomb = r
				tomb.State = leaseRevoking
				ttl = max(ttl, r.ExpiresAt.Sub(now)+time.Minute)
			}
		}
	}
	raw := encodeLease(tomb)
	old, err := l.store.SwapLease(ctx, key, raw, ttl)
	l.mu.Lock()
	delete(l.held, key)
	if t := l.tracked[key]; t != nil && !t.revoking {
		delete(l.tracked, key) // whoever swapped the record revokes it
	}
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rec, derr := decodeLease(old)
	if old == nil || derr != nil || rec.State == leaseEnded {
		if lerr != nil || cur != nil || old != nil {
			// Off the deadline list; an invocation that never used the
			// intent has no entry there, and costs no third round trip.
			_ = l.store.ForgetLease(ctx, key)
		}
		return nil, derr
	}
	sec, err := l.seal.open(key, rec.Sealed)
	if err != nil {
		return nil, err
	}
	if tomb.State != leaseRevoking {
		// Claimed between the load and the swap: record what is owed.
		tomb = rec
		tomb.State = leaseRevoking
		raw = encodeLease(tomb)
		if _, err := l.store.SwapLease(ctx, key, raw, max(l.tombstone, rec.ExpiresAt.Sub(now)+time.Minute)); err != nil {
			raw = nil
		}
	}
	if rec.State == leaseRevoking {
		l.mu.Lock()
		t := l.tracked[key]
		l.mu.Unlock()
		if t != nil && t.revoking {
			return nil, nil // this replica owes it already and retries it
		}
		if !now.Before(rec.ExpiresAt) {
			l.settle(ctx, key, raw) // dead at Vault anyway
			return nil, nil
		}
		l.log.Info("finishing an owed lease revocation", "intent", intent, "lease_fp", rec.Fingerprint)
	}
	t := &trackedLease{tk: key, key: key, intent: intent, id: sec.ID, fp: rec.Fingerprint, expires: rec.ExpiresAt,
		deadline: rec.Deadline, revoking: true, raw: raw}
	rctx, endSpan := leaseSpan(ctx, SpanRevoke, intent, strings.TrimPrefix(key, intent+":"))
	ok := l.attempt(rctx, t)
	endSpan(rec.Fingerprint, !ok)
	return &broker.LeaseEnd{Intent: intent, Fingerprint: rec.Fingerprint, Revoked: ok}, nil
}

// settle records in the store that the lease under key is revoked (or
// dead at Vault): the owed record raw becomes a plain tombstone, and the
// key leaves the deadline list. A record changed meanwhile (another
// replica settled it) is left alone.
func (l *Manager) settle(ctx context.Context, key string, raw []byte) {
	if raw == nil {
		return
	}
	rec, err := decodeLease(raw)
	if err != nil {
		return
	}
	tomb := encodeLease(leaseRecord{State: leaseEnded, Fingerprint: rec.Fingerprint, ObtainedAt: rec.ObtainedAt, ExpiresAt: rec.ExpiresAt})
	if _, err := l.store.UpdateLease(ctx, key, raw, tomb, l.tombstone); err == nil {
		_ = l.store.ForgetLease(ctx, key)
	}
}

// revokeLater revokes a lease no record holds (the loser of a claim race)
// from the background loop, at once.
func (l *Manager) revokeLater(key, intent, id, fp string, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Keyed apart from the record's own key, which the winner's lease
	// may be tracked under.
	l.tracked[key+"#"+fp] = &trackedLease{tk: key + "#" + fp, key: key, intent: intent, id: id, fp: fp, expires: expires, revoking: true}
}

// attempt tries one revocation of t; on failure t is tracked for the
// background retries, and, when a record holds it, listed in the store
// as due at the next try, for any replica to retry should this one be
// gone. It reports whether Vault confirmed.
func (l *Manager) attempt(ctx context.Context, t *trackedLease) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.RevokeTimeout)
	err := l.revoke(rctx, t.id)
	cancel()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.RevokeTimeout)
	defer scancel()
	if err == nil {
		l.mu.Lock()
		delete(l.tracked, t.tk)
		l.mu.Unlock()
		l.metrics.revocation("ok")
		l.log.Info("lease revoked", "intent", t.intent, "lease_fp", t.fp)
		if t.raw != nil {
			l.settle(sctx, t.key, t.raw)
		}
		return true
	}
	l.mu.Lock()
	t.attempts++
	wait := l.cfg.RevokeBackoff * time.Duration(math.Pow(2, float64(min(t.attempts-1, 16))))
	t.nextTry = l.now().Add(min(wait, time.Minute))
	if t.attempts >= l.cfg.RevokeAttempts && !t.failing {
		t.failing = true
		l.metrics.revocation("gave_up")
		l.log.Error("lease revocation failing; retried slowly until the lease expires at Vault", "intent", t.intent,
			"lease_fp", t.fp, "attempts", t.attempts, "expires_at", t.expires.UTC().Format(time.RFC3339), "err", err)
	} else {
		l.metrics.revocation("retry")
		l.log.Warn("lease revocation failed; retrying", "intent", t.intent, "lease_fp", t.fp, "attempts", t.attempts, "err", err)
	}
	l.tracked[t.tk] = t
	next := t.nextTry
	l.mu.Unlock()
	if t.raw != nil {
		// Another replica takes over a little after this one's next try.
		_ = l.store.DeferLease(sctx, t.key, next.Add(l.cfg.CheckInterval))
	}
	return false
}

func (l *Manager) revoke(ctx context.Context, id string) error {
	if l.vault == nil {
		return broker.ErrLeaseUnavailable
	}
	if err := l.vault.Sys().RevokeWithContext(ctx, id); err != nil {
		return l.vaultError(err)
	}
	return nil
}

// maybeRenew renews h's lease when it expires within RenewBefore and the
// invocation is to outlive it. A failed renewal does not fail the request:
// the lease serves until it expires.
func (l *Manager) maybeRenew(ctx context.Context, key string, h *heldLease) {
	now := l.now()
	if !h.rec.Renewable || h.rec.ExpiresAt.Sub(now) > l.cfg.RenewBefore || !h.rec.Deadline.After(h.rec.ExpiresAt) {
		return
	}
	_, _, _ = l.sf.Do("renew:"+key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.RevokeTimeout)
		defer cancel()
		return nil, l.renew(rctx, key, h)
	})
}

func (l *Manager) renew(ctx context.Context, key string, h *heldLease) error {
	now := l.now()
	inc := int(math.Ceil(h.rec.Deadline.Sub(now).Seconds()))
	s, err := l.vault.Sys().RenewWithContext(ctx, h.sec.ID, inc)
	if err == nil && (s == nil || s.LeaseDuration <= 0) {
		err = errors.New("the renewal answered no duration")
	}
	l.metrics.renewal(err)
	if err != nil {
		err = l.vaultError(err)
		l.log.Warn("lease renewal failed", "lease_fp", h.rec.Fingerprint, "err", err)
		return err
	}
	rec := h.rec
	rec.ExpiresAt = now.Add(time.Duration(s.LeaseDuration) * time.Second)
	b := encodeLease(rec)
	ok, err := l.store.UpdateLease(ctx, key, h.raw, b, l.recordTTL(rec))
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || !ok {
		// Renewed or ended elsewhere: read the record again at next use.
		delete(l.held, key)
		return err
	}
	if l.held[key] == h {
		l.held[key] = &heldLease{rec: rec, raw: b, sec: h.sec}
	}
	if t := l.tracked[key]; t != nil && !t.revoking {
		t.expires = rec.ExpiresAt
	}
	return nil
}

// Start runs Run in the background until the returned stop is called;
// stop returns once Run has.
func (l *Manager) Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// Run renews this replica's leases, ends those whose deadline passed with
// no End (a host that died mid-invocation), and retries revocations, every
// CheckInterval until ctx ends; then it tries each owed revocation once
// more.
func (l *Manager) Run(ctx context.Context) {
	tick := time.NewTicker(l.cfg.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			l.sweep(context.WithoutCancel(ctx), true)
			return
		case <-tick.C:
			l.sweep(ctx, false)
		}
	}
}

func (l *Manager) sweep(ctx context.Context, final bool) {
	now := l.now()
	l.mu.Lock()
	var due, dead []*trackedLease
	for k, t := range l.tracked {
		if t.revoking && !now.Before(t.expires) {
			delete(l.tracked, k) // dead at Vault anyway
			l.metrics.revocation("expired")
			dead = append(dead, t)
			continue
		}
		if final && !t.revoking {
			continue // another replica may serve the invocation on
		}
		if t.revoking && (final || !now.Before(t.nextTry)) || !t.revoking && l.checkDue(t, now) {
			due = append(due, t)
		}
	}
	for k := range l.held {
		if h := l.held[k]; now.After(h.rec.Deadline.Add(l.tombstone)) {
			delete(l.held, k)
		}
	}
	l.mu.Unlock()
	for _, t := range dead {
		l.settle(ctx, t.key, t.raw)
	}
	for _, t := range due {
		if t.revoking {
			l.attempt(ctx, t)
			continue
		}
		l.check(ctx, t, now)
	}
	if !final {
		l.sweepDue(ctx, now)
	}
}

// maxDuePerSweep bounds the leases one sweep ends for other replicas.
const maxDuePerSweep = 64

// sweepDue ends the leases whose invocation's deadline passed with no
// end, whichever replica obtained them (it may be gone): the store lists
// them by deadline, and the swap in endKey lets only one replica revoke.
func (l *Manager) sweepDue(ctx context.Context, now time.Time) {
	keys, err := l.store.DueLeases(ctx, now, maxDuePerSweep)
	if err != nil {
		return
	}
	for _, key := range keys {
		intent, _, _ := strings.Cut(key, ":")
		if _, ok := l.intents[intent]; !ok {
			_ = l.store.ForgetLease(ctx, key) // an intent no longer configured
			continue
		}
		l.log.Info("lease deadline passed without an end; revoking", "intent", intent)
		_, _ = l.endKey(ctx, key, intent)
	}
}

// leaseRecheck is how often a replica reads the record of a lease it
// obtained when neither its deadline nor its renewal is near: to notice
// an end on another replica (for the outstanding-leases gauge) without a
// store read per lease and tick.
const leaseRecheck = 10 * time.Second

// checkDue reports whether the obtained lease t needs a check now: its
// deadline passed, its renewal window opened, or leaseRecheck went by.
// The caller holds l.mu.
func (l *Manager) checkDue(t *trackedLease, now time.Time) bool {
	if !now.Before(t.deadline) || t.expires.Sub(now) <= l.cfg.RenewBefore || now.Sub(t.checked) >= leaseRecheck {
		t.checked = now
		return true
	}
	return false
}

// check looks after a lease this replica obtained: forgotten when another
// replica ended it, ended at its deadline, renewed in time.
func (l *Manager) check(ctx context.Context, t *trackedLease, now time.Time) {
	raw, err := l.store.LoadLease(ctx, t.key)
	if err != nil {
		return
	}
	rec, derr := decodeLease(raw)
	if raw == nil || derr != nil || rec.State != leaseActive || rec.Fingerprint != t.fp {
		l.mu.Lock()
		if l.tracked[t.key] == t {
			delete(l.tracked, t.key)
		}
		l.mu.Unlock()
		return
	}
	if !now.Before(rec.Deadline) {
		l.log.Info("lease deadline passed without an end; revoking", "intent", t.intent, "lease_fp", t.fp)
		_, _ = l.endKey(ctx, t.key, t.intent)
		return
	}
	if sec, err := l.seal.open(t.key, rec.Sealed); err == nil {
		l.maybeRenew(ctx, t.key, &heldLease{rec: rec, raw: raw, sec: sec})
	}
}
