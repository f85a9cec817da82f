// Package pluginv1 is the host side of plugin/v1: providers that speak
// gRPC over a unix socket, announced by a go-plugin-style handshake line.
// A launched provider (Plugin) is a host.Runtime; AddInstalled and
// AddProvider register one with a host.Host, whose registry, supervisor,
// policy and evidence then treat it as any other plugin.
//
// # What lives here
//
//   - launch and handshake (plugin.go, line.go): the binary's digest, the
//     handshake line, Handshake, GetManifest and GetDescriptors checked
//     against the installed manifest and the host's own port files;
//   - invoke (invoke.go): a call resolved against the host's ports
//     (compiled or installed), sent as an Envelope, and the provider's stream checked
//     message by message (sdk/plugin's stream check);
//   - HostService (hostservice.go): Log, RequestCredential, EmitEvidence,
//     ReportProgress and ResolveReference (reference.go), each checked
//     against the invocation in flight, its key and its limits;
//   - who may call whom (auth.go, refusals.go): the launch keys, the
//     probe that refuses a provider which does not check them, the
//     HostService's peer-uid and key checks, and the log and metric of
//     every refusal;
//   - install (install.go, lockfile.go, manifest.go, installer.go):
//     review, stage, verify by launching once, swap by rename, and the
//     control API's install while the host runs (Installer);
//   - installed ports (portfile.go, portinstall.go, portinstaller.go): a
//     descriptor set reviewed (ParsePortSet), kept and pinned by digest
//     in the lockfile (InstallPort), checked again at every start
//     (LoadPorts) and served from the host.PortSet every call looks its
//     port up in; PortInstaller for the control API;
//   - the adapter (adapter.go): plugin/v1's protobuf types become the
//     host's own (host.CallStatus, host.Diagnostic, policy.Risk, …) at
//     this package's edge. This package, sdk/plugin and the generated
//     code are the only ones that import the plugin/v1 protobuf package
//     (here as pb).
//
// # Size
//
// The package is about 2,000 lines because it is one protocol,
// host side, whole: launch, HostService, invoke and install share the
// Plugin and its invocations in flight, and splitting them further would
// export what only this protocol needs.
//
// # Security
//
// A provider is identified by what the host gave it at launch — its own
// HostService socket and keys — never by what it sends. Other processes
// can reach both sockets by path (same uid, or root), so every call
// authenticates: the host presents a per-launch host key on every
// PluginService call (the provider holds only its digest); the provider
// presents a per-launch plugin key on every HostService call, and, for an
// invocation, that invocation's key, sent with Invoke; where the plugin
// has a uid of its own, the HostService also checks the peer uid
// (SO_PEERCRED). A provider that answers a call without the host key is
// refused at launch (ErrKeylessProvider). Every refusal is logged with
// the caller's uid and pid and counted (RefusedCallsMetric). Errors and
// log lines name the field, never the value a provider sent (LineError),
// and never a key. A provider gets handles,
// never secrets, and only for the intents and destinations its installed
// manifest declares; the host's copies of the port files, not the
// provider's, govern every call.
//
// # Concurrency
//
// A Plugin is safe for concurrent use; the host's supervisor owns its
// lifecycle. Shutdown cancels the invocations in flight and revokes the
// provider's handles before it asks the provider to stop.
package pluginv1
