// Package plugin is the provider side of plugin/v1 in Go: the handshake
// constants, Serve (cookie check, version negotiation, launch keys, a
// unix socket in a private directory, the handshake line), the stream
// checks a host applies (StreamCheck), and helpers for calling the host
// (DialHost) and the egress proxy (ProxyClient).
//
// # Writing a provider
//
// A provider's main calls Main with a Register function that registers
// its PluginService. In Invoke it calls the host through the client
// DialHost returns, with the Invoke stream's context; the host answers
// with handles, never secrets, and ProxyClient sends requests through the
// egress proxy with a handle. The Example functions show each step, and
// the repository's examples/tickets-provider is a complete provider.
//
// # Security
//
// A provider's socket and its host's HostService socket can be reached by
// other processes of the same uid (on an unprivileged host, every plugin
// runs as the host's uid), so neither side trusts a connection for having
// reached it. The host gives each launch two keys of its own, one per
// direction, in the environment (HostKeyDigestEnv, PluginKeyEnv), and the
// SDK does the rest:
//
//   - Serve reads the keys and removes them from the environment, so that
//     no process the provider starts inherits them. Without them it does
//     not serve (ErrNoLaunchKey).
//   - Every PluginService call must carry the host's key
//     (HostKeyMetadata); the provider holds only its SHA-256 and compares
//     in constant time, before any handler runs. Any other caller gets
//     Unauthenticated, and the provider reports the refusal to its host
//     (a HostService.Log marked ReportMetadata, with the caller's uid and
//     pid where the provider can see them), which logs and counts it.
//   - Invoke carries an invocation key (InvocationKeyMetadata) that Serve
//     puts in the handler's context. The client DialHost returns presents
//     the provider's key on every HostService call and the invocation key
//     found in the call's context; the host refuses a call whose
//     invocation key does not belong to the invocation_id it names. So
//     make HostService calls with the Invoke's context, or one derived
//     from it (context.WithoutCancel keeps the key).
//
// A provider that answers a call without the host's key — one built with
// an SDK older than the launch keys, or one that does not check them — is
// refused at launch: the host probes once, without the key, after the
// handshake. docs/plugin-v1.md says what a provider written without this
// package must do.
//
// # Concurrency
//
// Serve runs until Stop, SIGINT or SIGTERM; Stop may be called from any
// goroutine, any number of times. The HostService client DialHost returns
// is safe for concurrent use.
package plugin
