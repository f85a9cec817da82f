// Package executa is the host side ("Agent") of the Executa protocol:
// JSON-RPC 2.0 over a plugin's stdin and stdout, one object per line, with
// v2 capability negotiation and a silent fallback to protocol 1.1.
//
// Add registers an Executa plugin with a host.Host: the adapter
// (adapter.go) makes a Process a host.Runtime, so the host's registry,
// supervisor, policy and evidence treat it as any other plugin.
//
// # Size
//
// The package is over 1,500 lines because it is the whole host side of
// one protocol: the process and its frames, negotiation, and the reverse
// RPC services a plugin calls back (sampling, storage, files: their
// gates, tokens, per-invoke limits and error codes). Each file is one of
// those concerns, and each shares the Process and its calls in flight.
// What is host-wide instead, one per host for every Executa plugin, lives
// in packages of its own that this one reaches through Options and never
// the other way: the sampling backends (host/executa/sampling: the
// OpenAI-compatible backend through the egress proxy, the fixture), and
// APS storage (host/executa/aps: the key-value store, and the files
// service with its upload server and its collection of abandoned
// uploads).
//
// # Security
//
// A plugin is untrusted: every frame is bounded (2 MiB) and validated, and
// a bad frame is a protocol error that never crashes the host. The plugin
// starts with the user's environment minus anything that could hand it a
// secret or authority (VAULT_*, AIRLOCK_*, a configurable deny list), plus
// HTTP_PROXY for the egress proxy; strict mode passes only PATH, HOME,
// LANG, TMPDIR and the proxy. Declared credentials are delivered as
// handles, not secrets, unless a per-plugin, logged opt-in says otherwise.
package executa
