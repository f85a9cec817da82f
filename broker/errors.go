package broker

import "errors"

// Resolve failures. They are distinct for the audit log; anything facing a
// plugin must answer all of them the same way.
var (
	// ErrHandleUnknown: no such handle (never issued, mistyped, or expired
	// long enough ago that the store forgot it).
	ErrHandleUnknown = errors.New("handle is unknown")
	// ErrHandleExpired: the handle's expires_at has passed.
	ErrHandleExpired = errors.New("handle has expired")
	// ErrHandleRevoked: its invocation or plugin was revoked.
	ErrHandleRevoked = errors.New("handle was revoked")
)

// Issue failures.
var (
	// ErrIntentUnknown: the intent is not configured. The name came from a
	// plugin and is not repeated in the error.
	ErrIntentUnknown = errors.New("credential intent is not configured")
	// ErrIntentUnbound: the intent is configured without a secret binding.
	ErrIntentUnbound = errors.New("credential intent has no secret binding")
	// ErrDeadlinePassed: the invocation deadline is not in the future.
	ErrDeadlinePassed = errors.New("invocation deadline has passed")
	// ErrDryRunWrite: a dry run may only get a read-class intent.
	ErrDryRunWrite = errors.New("dry run may only use a read-class intent")
	// ErrIssueLimit: the invocation already holds the most handles the
	// broker allows (a safety cap behind the host's own limit).
	ErrIssueLimit = errors.New("invocation handle limit reached")
	// ErrInvocationRevoked: the invocation or plugin was revoked; no new
	// handle is issued for it.
	ErrInvocationRevoked = errors.New("invocation was revoked")
	// ErrStoreFull: the memory store holds its maximum number of handles.
	ErrStoreFull = errors.New("handle store is full")
	// ErrStoreUnavailable: the handle store (Redis) cannot be reached. Issue
	// fails and Resolve fails closed.
	ErrStoreUnavailable = errors.New("handle store is unavailable")
	// ErrBadRequest: a required field of an issue request is empty.
	ErrBadRequest = errors.New("issue request is incomplete")
)

// Revocation failures.
var (
	// ErrRevocationUnreplicated: the Redis primary applied the revocation
	// (it is enforced now) but no replica confirmed it within the wait, so
	// a failover could still undo it. Revocations are idempotent: retry.
	ErrRevocationUnreplicated = errors.New("revocation was applied but no replica confirmed it")
	// ErrRevocationOwed: the handle store did not acknowledge the
	// revocation (unreachable, or unreplicated). The broker keeps it,
	// refuses what it covers on this replica at once and retries it until
	// the store acknowledges it or all it covers has expired.
	ErrRevocationOwed = errors.New("revocation is owed: refused on this replica, not yet acknowledged by the handle store")
)

// Secret failures.
var (
	// ErrSecretUnavailable: the secret source cannot serve now (Vault
	// unreachable, sealed, token revoked, permission denied). The proxy
	// answers 503 and never sends a request without its credential.
	ErrSecretUnavailable = errors.New("secret source is unavailable")
	// ErrSecretNotFound: nothing is stored at the binding's path.
	ErrSecretNotFound = errors.New("secret not found at the bound path")
	// ErrSecretFieldMissing: the secret exists but lacks the bound field.
	ErrSecretFieldMissing = errors.New("secret lacks the bound field")
	// ErrWrongKVVersion: the mount's KV version is not the configured one.
	ErrWrongKVVersion = errors.New("secret mount has a different KV version than configured")
)

// Lease failures (secrets with source vault_lease).
var (
	// ErrLeaseUnavailable: the lease could not be obtained at its first
	// use (Vault unreachable, sealed, refusing the path). The proxy answers
	// 503 lease_unavailable and sends nothing upstream.
	ErrLeaseUnavailable = errors.New("leased secret could not be obtained")
	// ErrLeaseEnded: the invocation's lease was revoked (the invocation
	// ended); a use that raced with the end is refused.
	ErrLeaseEnded = errors.New("the invocation's lease has ended")
	// ErrLeaseNeedsInvocation: a leased secret is bound to an invocation;
	// it cannot be read outside one (check-config, context credentials).
	ErrLeaseNeedsInvocation = errors.New("a leased secret is only obtained within an invocation")
)

// Broker API failures, on the client's side of the socket.
var (
	// ErrBrokerUnavailable: the broker API could not be reached.
	ErrBrokerUnavailable = errors.New("broker API is unavailable")
	// ErrUnauthenticated: the broker API refused the caller's token
	// (none presented, or not the one in broker.api.token_file).
	ErrUnauthenticated = errors.New("broker API refused the caller")
)
