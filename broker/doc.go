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
// # Size
//
// The package is over 1,500 lines because it holds one concept — a
// handle, from mint to revocation — behind its two small interfaces
// (Store, SecretSource) with their implementations (memory and Redis
// stores, Vault and file sources) and the API the host calls. Each file
// is one of those; the implementations sit beside the interface they
// satisfy so that a change to the contract and to every store is one
// review.
package broker
