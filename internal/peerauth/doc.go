//go:build linux

// Package peerauth decides who may call Airlock's local APIs: the broker
// API that `airlock serve` offers the host and operators, and the control
// API of `airlock host`.
//
// Two checks, both required on a unix socket:
//
//   - ListenUnix listens in a private directory (0700, or 0750 with one
//     shared group) and closes, before reading a byte, every connection
//     whose peer uid (SO_PEERCRED) is not allowed.
//   - A bearer token read from a file (Token, ReadToken): the caller
//     presents it on every call.
//
// The same pieces serve plugin/v1's sockets, where the host and each
// provider authenticate each other: PeerCredentials are gRPC transport
// credentials that put each connection's peer uid and pid in its
// AuthInfo (PeerOf), and NewSecret and NewToken make and match the
// per-launch keys.
//
// # Security
//
// A plugin sandboxed with Landlock runs with the host's uid and can
// connect() to any unix socket it can name, so a uid check alone admits
// it. It cannot read the token file (the sandbox hides Airlock's state),
// so the token is what separates the host and operators from a plugin.
// Tokens are compared in constant time (over their SHA-256 digests, so
// not even the length leaks), and never appear in an error or a log line:
// messages name the file, never its content.
//
// Token and key files are refused when others may read them; a token may
// be readable by one group only when that group is configured to share it
// (the broker token, read by the host running as another user).
package peerauth
