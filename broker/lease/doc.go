// Package lease serves the broker's leased secrets (intent source
// vault_lease): credentials Vault issues with a lease, such as a database
// or RabbitMQ role's creds, or a PKI certificate from a role with
// generate_lease.
//
// [Manager] implements [broker.LeasedSecrets]: the broker asks it for the
// fields of an invocation's lease when a handle of a leased intent is
// used, and tells it when the invocation ends. One lease per invocation
// and intent, obtained at the first use, shared by every replica through
// the handle store ([broker.LeaseStore]: the memory and Redis stores),
// renewed while the invocation outlives it and revoked at Vault when the
// invocation ends or, failing that, at its deadline.
//
// # Security
//
// A lease id is treated like a handle: the store keeps it, with the
// credentials, sealed with AES-256-GCM under the replicas' shared seal
// key (broker.leases.seal_key_file) and bound to the record's key; logs,
// metrics, audit lines and evidence carry only its fingerprint (the first
// 8 bytes of its SHA-256, hex). Errors name the kind of a Vault failure,
// never what Vault sent.
//
// # Concurrency
//
// A Manager is safe for concurrent use; concurrent first uses of one
// invocation's lease on a replica make one Vault request. Run (or Start)
// does the renewals, deadline revocations and revocation retries until its
// context ends, then tries each owed revocation once more.
package lease
