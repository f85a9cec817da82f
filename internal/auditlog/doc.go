// Package auditlog writes audit lines off the request path: each request
// hands one preformatted JSON line to a Writer, which queues it (bounded)
// and writes queued lines in batches, one write call per batch, from its
// own goroutine. Lines are built with internal/jsonenc, which encodes as
// encoding/json does.
//
// # When the disk is slower than the proxy
//
// Audit lines are evidence, so the Writer does not trade them for speed
// silently. A request whose line finds the queue full waits for room —
// the proxy slows to the speed of its audit output (counted as a wait) —
// for at most Options.MaxWait. Only when the output makes no progress for
// that long (a stalled disk, a blocked pipe) is a line dropped, and then
// loudly: the drop is counted (airlock_audit_lines_dropped_total), logged
// once per gap, Saturated reports true so that the proxy refuses new
// requests (no egress without its record) until the output recovers, and
// the audit stream itself gets an "audit_gap" line naming how many lines
// are missing, at the place they are missing from. A write that fails
// (a full disk) loses the lines it did not write whole, counted the same
// way; part of a line left by a disk that filled mid-line is ended with a
// newline before anything follows it, so no later line is glued to it.
//
// # Concurrency
//
// WriteLine is safe for concurrent use. The Writer owns one goroutine from
// New until Close, which writes what is queued and returns (after at most
// CloseWait for a stalled output, the rest counted as dropped).
package auditlog
