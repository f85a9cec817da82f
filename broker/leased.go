package broker

import (
	"context"
	"reflect"
	"time"
)

// LeasedSecrets serves the intents bound to a leased secret (source
// vault_lease): one lease per invocation and intent, obtained at the
// first use and ended with the invocation. Package broker/lease implements
// it with Vault; the broker reaches leases only through it.
type LeasedSecrets interface {
	// Fields returns the fields of g's invocation's lease of g's intent,
	// and the lease's fingerprint (never its id), obtaining the lease
	// at the invocation's first use. Errors wrap ErrLeaseUnavailable or
	// ErrLeaseEnded.
	Fields(ctx context.Context, g *Grant) (fields map[string]string, fingerprint string, err error)
	// End ends the invocation's leases on every replica; ending twice is
	// harmless.
	End(ctx context.Context, invocationID string) ([]LeaseEnd, error)
	// State reads the invocation's lease of intent, for operators.
	State(ctx context.Context, invocationID, intent string) (LeaseState, error)
	// Check is a readiness check: it fails while lease revocations keep
	// failing.
	Check(ctx context.Context) error
}

// LeaseEnd reports one lease an invocation's end revoked.
type LeaseEnd struct {
	Intent      string
	Fingerprint string
	// Revoked: Vault confirmed the revocation; otherwise it is retried in
	// the background (and the lease dies at its TTL at the latest).
	Revoked bool
}

// InvocationEnd is what ending an invocation revoked.
type InvocationEnd struct {
	Handles int
	// HandlesOwed: the store did not acknowledge the handles' revocation;
	// the broker refuses them and retries (ErrRevocationOwed).
	HandlesOwed bool
	Leases      []LeaseEnd
}

// InvocationEnder ends an invocation and says what it revoked; *Broker
// and broker/api's *Client implement it, so the host can list the revoked leases in
// the invocation's outcome evidence.
type InvocationEnder interface {
	EndInvocation(ctx context.Context, invocationID string) (InvocationEnd, error)
}

var _ InvocationEnder = (*Broker)(nil)

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

// isNilPointer reports whether v holds a nil pointer: a caller that passes
// a nil *lease.Manager has configured no leases.
func isNilPointer(v any) bool {
	if v == nil {
		return false
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
