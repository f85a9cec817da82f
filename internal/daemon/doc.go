// Package daemon holds the lifecycles of Airlock's long-running commands,
// so that `cmd/airlock` only parses flags and loads config, and tests call
// the same entry points in process:
//
//   - Serve runs the broker, egress proxy, token issuer, broker API and
//     admin listener (`airlock serve`).
//   - Host runs the plugin host beside a Serve in another process, over
//     the broker socket (`airlock host`).
//   - Dev composes a Serve and a Host in one process on embedded defaults,
//     with demo plugins and a local demo upstream (`airlock dev`).
//
// The package is internal: its entry points take the loaded config
// (internal/config) and Vault client (internal/vault) as they are, which
// only this module can build. It is the composition root of the one
// binary, not a library: the packages it wires (broker, proxy, tokens,
// host, sdk) are the public API, each with options a caller outside the
// module can build.
//
// Process-wide state is main's: go-redis's logger (LogRedis) and the
// SIGHUP handler (Options.Reload) are set by cmd/airlock, never
// by a constructor here.
//
// Each returns when its context ends (after a graceful shutdown) or when
// one of its own parts fails: its config, a listener, the evidence log.
// A plugin that fails never ends a Host: it is marked failed and the host
// serves the others.
//
// # Size
//
// The package is about 1,800 lines because it is the one place that
// wires every part: serve, host and dev each read their whole config
// section, and the wiring steps are short named functions rather than a
// package per command, which would only move the same calls apart.
//
// # Concurrency
//
// Every goroutine an entry point starts ends before it returns.
package daemon
