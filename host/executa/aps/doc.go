// Package aps is the host's plugin storage (APS): the key-value store
// behind Executa's storage/* and the files service behind files/*, one
// of each per host, shared by every Executa plugin.
//
// Store is one bbolt file (mode 0600) that survives restarts. Its buckets
// are per scope owner ("user/<id>", "tool/<plugin>", "app/<id>"), and each
// owner may use Store.Quota bytes, values and file bytes together. Files
// keeps its metadata in the same Store and the bytes in a directory of
// its own; the bytes move over presigned, expiring, HMAC-signed URLs that
// Files.Handler serves, so they never pass through a plugin's stdout.
// Files.Run collects uploads begun and never completed.
//
// The package knows nothing of the protocol: host/executa verifies a
// plugin's storage token, resolves its scope to an owner, enforces the
// per-invoke limits, and maps this package's errors (ErrPrecondition,
// ErrQuota, ErrNotFound, ErrInvalidPath, ErrTooLarge) to the protocol's
// codes. It never imports host/executa.
package aps
