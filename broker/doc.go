// Package broker mints, resolves and revokes credential handles, and reads
// the secrets they stand for from Vault (or a file, for dev).
//
// A handle is an opaque bearer string, "alh_" followed by 43 base62
// characters (256 random bits) and a 6-character CRC-32 checksum, so
// secret scanners can recognise leaked ones (`alh_[0-9A-Za-z]{49}`) and
// the proxy can reject a mistyped one without a store lookup. It encodes
// nothing: everything it grants is in the [Grant] the store keeps under
// the handle's SHA-256, and the handle itself is never stored.
//
// # Security
//
// A grant never outlives its invocation's deadline (nor MaxHandleLifetime).
// Resolve distinguishes unknown, expired and revoked handles for the audit
// log; callers facing a plugin must answer all three alike. Revoking an
// invocation or a plugin takes effect on the next Resolve on every replica
// sharing the store, and also refuses handles whose issue raced with the
// revocation. Errors and logs carry a handle's fingerprint (the first 8
// bytes of its SHA-256, hex), never the handle, and never a secret value.
// Intent names that came from a plugin are not echoed in errors.
//
// # Concurrency
//
// Broker, the stores and the secret cache are safe for concurrent use.
// Concurrent cache misses for one secret make one source read.
//
// # Layout
//
// The package is the broker's core: handles (handle.go) and the grants
// behind them (grant.go), plugin passes (pass.go), revocation and owed
// revocations (owed.go), the ledger of budgets, violations, access grants
// and approvals (ledger*.go), the inject kinds and processors that say
// how a secret goes into a request (inject*.go, processors.go), the
// secret sources and their cache (source_*.go, cache.go), the config, and
// the contracts the rest implements: Store, LeaseStore and Ledger (the
// stores), SecretSource (Vault, file), LeasedSecrets (the lease
// manager), and API, InvocationEnder and TokenMinter (the broker in
// process, or its client over the socket).
//
// Two packages implement those contracts and import this one, never the
// reverse: broker/lease (Vault leases, source vault_lease) and broker/api
// (the gRPC server and client of the broker API).
//
// The memory and Redis stores (store_*.go, ledger_memory.go,
// ledger_redis.go, lease_store.go) stay here: they apply the ledger's
// rules (ledger_rules.go: budget checks, approval decisions) that the
// core's own types carry, and the core's tests run on them; in a package
// of their own they would need those rules exported and the tests moved
// out of the package.
package broker
