// Package executa is the host side ("Agent") of the Executa protocol:
// JSON-RPC 2.0 over a plugin's stdin and stdout, one object per line, with
// v2 capability negotiation and a silent fallback to protocol 1.1.
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
