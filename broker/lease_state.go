package broker

import (
	"context"
	"time"
)

// InvocationEnd is what ending an invocation revoked.
type InvocationEnd struct {
	Handles int
	// HandlesOwed: the store did not acknowledge the handles' revocation;
	// the broker refuses them and retries (ErrRevocationOwed).
	HandlesOwed bool
	Leases      []LeaseEnd
}

// InvocationEnder ends an invocation and says what it revoked; *Broker
// and *Client implement it, so the host can list the revoked leases in
// the invocation's outcome evidence.
type InvocationEnder interface {
	EndInvocation(ctx context.Context, invocationID string) (InvocationEnd, error)
}

var (
	_ InvocationEnder = (*Broker)(nil)
	_ InvocationEnder = (*Client)(nil)
)

// Lease states an operator sees (LeaseState.State).
const (
	LeaseStateNone   = "none"   // not used yet in the invocation: no lease
	LeaseStateActive = "active" // obtained, in use
	LeaseStateEnded  = "ended"  // revoked (or being revoked) with the invocation
)

// LeaseState is an invocation's lease of an intent, as an operator may
// see it: never the lease id nor the credentials.
type LeaseState struct {
	Fingerprint string
	State       string
	ObtainedAt  time.Time
	ExpiresAt   time.Time
	Renewable   bool
}

// State reads the invocation's lease of intent from the store.
func (l *Leases) State(ctx context.Context, invocationID, intent string) (LeaseState, error) {
	raw, err := l.store.LoadLease(ctx, leaseKey(invocationID, intent))
	if err != nil {
		return LeaseState{}, err
	}
	if raw == nil {
		return LeaseState{State: LeaseStateNone}, nil
	}
	rec, err := decodeLease(raw)
	if err != nil {
		return LeaseState{}, err
	}
	st := LeaseState{Fingerprint: rec.Fingerprint, State: LeaseStateActive, ObtainedAt: rec.ObtainedAt,
		ExpiresAt: rec.ExpiresAt, Renewable: rec.Renewable}
	if rec.State != leaseActive {
		st.State = LeaseStateEnded
	}
	return st, nil
}
