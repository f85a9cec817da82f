// Package control is the plugin host's control API: HTTP (over a
// peer-checked unix socket, or TCP with mutual TLS or a token) in front of
// a host.Host.
//
//   - POST /v1/invocations runs a call through the host's invoke path and
//     streams the answer as NDJSON (Event): "running" events, then one
//     "outcome". Refusals before the call are JSON errors
//     {"error": code, "detail": …} with a 4xx/5xx status.
//   - GET /v1/plugins lists every plugin with its state and health.
//   - POST /v1/plugins installs a package while the host runs, through the
//     Installer the wiring gave EnableInstall (pluginv1.Installer).
//   - GET /v1/evidence/head and /v1/evidence/jwks.json serve the evidence
//     log's latest signed checkpoint and the key that signs it.
//   - /v1/grants and /v1/approvals list, issue and revoke access grants and
//     decide approvals in the broker's ledger (EnableLedger): operators
//     issue and revoke; anyone but the requester decides; a revocation
//     runs the host's hook (SetGrantRevoked).
//
// # Security
//
// Every request is the operator's authority (an install above all):
// RequireToken refuses a request without the control token before its
// body is read. Error details never echo what a caller or a plugin sent.
package control
