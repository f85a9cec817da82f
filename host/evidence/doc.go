// Package evidence is the plugin host's evidence log: an append-only,
// hash-chained file of records (policy decisions, invocations, credentials
// issued, lifecycle events, plugin submissions), with signed checkpoints
// of its head.
//
// # Writing
//
// Open takes a log for appending; an existing file must verify first, so
// the chain is never extended from a tampered head. Append completes a
// Record (seq, id, time, prev, hash) and writes it durably; every record
// holds the hash of the one before it. Checkpoint signs the head with a
// Key (Ed25519, LoadKey), whose public half is served as a JWKS.
//
// # Reading
//
// Verify and VerifyWith check a log byte for byte, and against keys and a
// head saved by an auditor (VerifyOptions), naming the first line that
// breaks (VerifyError). docs/evidence.md gives the format, so an auditor
// can check a log without this package.
//
// # Security
//
// The host writes every field of a record; a plugin's submission only
// ever becomes the Data of a record of type "plugin.<type>". Evidence
// fails closed: a step whose record cannot be written is refused with
// ErrUnavailable, unless the log is set to FailOpen. One process appends
// to a log (ErrInUse for a second).
//
// # Concurrency
//
// A Log serializes appends and is safe for concurrent use.
package evidence
