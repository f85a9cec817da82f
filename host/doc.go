// Package host is Airlock's plugin host. It runs untrusted plugins of two
// protocols — plugin/v1 providers (gRPC over a unix socket, this package's
// Plugin) and Executa plugins (JSON-RPC over stdio, package host/executa) —
// through one model, and records what they do in a hash-chained, signed
// evidence log.
//
// # One runtime model
//
// Each plugin process is a Runtime: Prepare, Health, Exited, Fault, Kill,
// Shutdown and Release, whatever its protocol. On top of it a Host has one
// of everything:
//
//   - one registry: every plugin by name, with its kind, state, pid,
//     restarts and last failure (Status, GET /v1/plugins);
//   - one supervisor per plugin (Add): launch, watch the exit and probe
//     health, and on a crash revoke the plugin's handles, record
//     lifecycle.crash, release what the host held for the dead process and
//     relaunch with backoff and a budget that resets; a failure a restart
//     cannot fix (binary digest, manifest drift) marks it failed at once;
//   - one invoke path (Invoke): prepare, policy decision, invocation.start,
//     run, revoke the invocation's handles, invocation.outcome.
//
// A plugin that fails is marked with its reason; the others keep serving.
//
// # Install
//
// Install reviews a plugin/v1 package, stages it, launches it once to check
// its handshake, manifest and port files, and only then swaps it in by
// renaming it to a version directory and replacing the lockfile (by
// rename). A package that fails leaves the installed version untouched.
// AddInstalled launches from the lockfile as it is at each launch, so a
// reinstall takes effect at the plugin's next launch.
//
// # Evidence
//
// EvidenceLog appends records (policy decisions, invocations, credentials
// issued, lifecycle events, plugin submissions), each holding the hash of
// the one before, and signed checkpoints of the head (EvidenceKey, served
// as a JWKS). VerifyEvidenceWith checks a log byte for byte, and against
// keys and a head saved by an auditor; docs/evidence.md gives the format.
// Evidence fails closed: a call whose record cannot be written is refused
// with evidence.ErrUnavailable unless the log is set to fail open.
//
// # Security
//
// Everything a plugin sends is checked, and errors name the field, never
// the value. A plugin is identified by the connection the host made at
// launch, never by what it claims. It holds handles, never secrets; every
// handle of an invocation is revoked before anyone learns the call is
// over, and every handle of a plugin when it exits. One host runs per
// state directory (LockStateDir) and one process appends to an evidence
// log.
//
// # Concurrency
//
// A Host is safe for concurrent use. Every goroutine it starts — the
// supervisors, and what a Runtime starts for its process — ends by
// Shutdown: calls in flight are cancelled with ErrHostShutdown, then every
// plugin is shut down within its grace. An EvidenceLog serializes appends.
package host
