// Package host is Airlock's plugin host: one registry, one supervisor and
// one invoke path for untrusted plugins of any protocol. The protocols
// live in subpackages that plug into it through the Runtime interface:
// host/pluginv1 (plugin/v1 providers, gRPC over a unix socket) and
// host/executa (Executa plugins, JSON-RPC over stdio).
//
// # The map
//
//   - host: Host (registry, supervisor, invoke path), Runtime and Action
//     (the seam every protocol implements), the call's own types
//     (InvokeRequest, Call, Outcome, CallStatus, Diagnostic, Actor,
//     Progress), Options, the state directory lock.
//   - host/pluginv1: the plugin/v1 runtime — launch and handshake,
//     HostService, install and lockfile — and the adapter from its
//     protobuf types to this package's. Nothing outside it (and sdk/plugin
//     and the generated code) sees a plugin/v1 protobuf type.
//   - host/executa: the Executa runtime and its adapter.
//   - host/evidence: the hash-chained, signed evidence log.
//   - host/policy: the policy that decides each call, and policy.Risk.
//   - host/control: the control API (HTTP) in front of a Host: principals,
//     invocations, access grants and approvals, ports, quarantine release.
//
// The invoke path also holds the decision point (decide*.go): who asks,
// which access grant applies and what was spent, the policy, the grant
// check, approval, budgets and residency, each a host-authored evidence
// record; and the watch of a running call's grant and violations, and
// quarantine (docs/architecture.md, "The decision point").
//
// Host imports none of its runtimes: the wiring (package daemon) adds
// plugins with pluginv1.AddInstalled, pluginv1.AddProvider or executa.Add,
// each of which calls Add with a Launcher of its kind.
//
// # One runtime model
//
// Each plugin process is a Runtime, whatever its protocol: Kind,
// Protocol, Sandbox, Pid, Prepare, Health, Exited, Fault, Shutdown, Kill
// and Release. On top of it a Host has one
// of everything:
//
//   - one registry: every plugin by name, with its kind, state, pid,
//     restarts and last failure (Status, GET /v1/plugins);
//   - one supervisor per plugin (Add): launch, watch the exit and probe
//     health, and on a crash record lifecycle.crash, release what the
//     host held for the dead process and relaunch with backoff and a
//     budget that resets; a failure a restart cannot fix (Permanent,
//     ErrManifestInvalid) marks it failed at once;
//   - one invoke path (Invoke): prepare, policy decision, invocation.start,
//     run, revoke the invocation's handles (EndInvocation, the one owner of
//     an invocation's end), invocation.outcome.
//
// The revocation of a plugin's handles and pass when it ends — a crash,
// an exit, a kill, a Shutdown, the host's shutdown — is the launch
// layer's, which started the process: its exit revokes them before
// Exited closes, and a runtime's Shutdown revokes them before it tells
// the plugin to stop.
//
// A plugin that fails is marked with its reason; the others keep serving.
//
// # Evidence
//
// Every step is recorded in the evidence log (Options.Evidence, see
// host/evidence) through Options.Record. Evidence fails closed: a call
// whose record cannot be written is refused with evidence.ErrUnavailable
// unless the log is set to fail open.
//
// # Security
//
// Everything a plugin sends is checked, and errors name the field, never
// the value. A plugin is identified by the connection the host made at
// launch, never by what it claims. It holds handles, never secrets; every
// handle of an invocation is revoked before anyone learns the call is
// over, and every handle of a plugin when it exits. With no policy every
// call is denied (ErrNoPolicy). One host runs per state directory
// (LockStateDir) and one process appends to an evidence log.
//
// # Concurrency
//
// A Host is safe for concurrent use. Every goroutine it starts — the
// supervisors, and what a Runtime starts for its process — ends by
// Shutdown: calls in flight are cancelled with ErrHostShutdown, then every
// plugin is shut down within its grace.
package host
