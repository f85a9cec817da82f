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
// A write that fails, whole or in part (a full disk), is cut back to the
// last whole record and the chain is not advanced, so the file always
// verifies and a checkpoint never signs what is not on disk; if the cut
// fails, the log takes no record (ErrTorn) until it succeeds. Repair
// cuts an incomplete last record that a crash left, and records the cut.
//
// # Rotation
//
// A log is rotated by renaming its file: before the next record (or at
// Reopen, on the operator's signal) the log goes on in a new file at its
// path, a segment whose first record (SegmentType) continues the chain.
// VerifyFiles checks a log's segments as one chain.
//
// # Reading
//
// Verify, VerifyWith and VerifyFiles check a log byte for byte, and against keys and a
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
