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
// Every request is made by a principal (host.Principal): Authenticate
// names it — from a client certificate (SPIFFE ID or subject), the unix
// socket's peer uid, a principal's own token file, or a JWT of the
// configured OIDC issuer (JWTVerifier, JWKS) — and puts it in the
// request's context (WithCaller) before any route runs; a request no
// method names is refused 401 before its body is read. An invocation
// runs for its caller, or for the actor it states when SetActorCheck's
// hook allows it, with its validated run context. Error details and log
// lines never echo a token or what a plugin sent.
//
// # Concurrency
//
// A Handler and the AuthOptions it is served with are safe for
// concurrent requests; the JWKS serializes its fetches.
package control
