package broker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// Inspection is what an operator may see of a handle: its grant and
// state, never the handle or a secret.
type Inspection struct {
	Grant   Grant
	Revoked bool
	Expired bool
	// Lease is the invocation's lease of the handle's intent, when the
	// intent's secret is leased (source vault_lease).
	Lease *LeaseState
}

// Inspect finds the grant of the handle with this fingerprint (16 hex
// characters, as evidence and audit lines show it).
func (b *Broker) Inspect(ctx context.Context, fingerprint string) (Inspection, error) {
	if !fingerprintRE.MatchString(fingerprint) {
		return Inspection{}, fmt.Errorf("%w: fingerprint: 16 lower-case hex characters", ErrBadRequest)
	}
	_, g, err := b.store.Find(ctx, fingerprint)
	if err != nil && !errors.Is(err, ErrHandleRevoked) {
		return Inspection{}, err
	}
	in := Inspection{Grant: *g, Revoked: errors.Is(err, ErrHandleRevoked), Expired: !b.now().Before(g.ExpiresAt)}
	if b.leases != nil && b.leased(g.Intent) {
		st, err := b.leases.State(ctx, g.InvocationID, g.Intent)
		if err != nil {
			return Inspection{}, err
		}
		in.Lease = &st
	}
	return in, nil
}

// RevokeHandle revokes the one handle with this fingerprint, on every
// replica sharing the store; it returns how many live handles it revoked
// (0 or 1). ErrRevocationOwed: the store did not acknowledge it; this
// replica refuses the handle at once and retries.
func (b *Broker) RevokeHandle(ctx context.Context, fingerprint string) (int, error) {
	if !fingerprintRE.MatchString(fingerprint) {
		return 0, fmt.Errorf("%w: fingerprint: 16 lower-case hex characters", ErrBadRequest)
	}
	at := b.now()
	n, err := b.revokeNow(ctx, owedHandle, fingerprint, at)
	if errors.Is(err, ErrHandleUnknown) {
		return 0, err
	}
	if err != nil {
		return 0, b.owe(owedHandle, fingerprint, at, err)
	}
	b.metrics.revoke("handle", n)
	b.log.Info("handle revoked by an operator", "handle_fp", fingerprint, "handles", n)
	return n, nil
}
