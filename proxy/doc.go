// Package proxy is Airlock's egress proxy: the only way out for a plugin.
//
// A plugin sends an absolute-form request (GET http://api.example.com/x)
// carrying a credential handle. The proxy resolves the handle with the
// broker, checks the destination against what the plugin's manifest and
// the intent binding allow, fetches the secret, injects it as the binding
// says, and re-originates the request over verified TLS — only to a
// public address, checked at connect time. Responses come back with the
// secret redacted if the upstream echoed it (the echo guard).
//
// It is built on github.com/elazarl/goproxy, with goproxy's unsafe
// defaults replaced: CONNECT is refused (405), the transport verifies TLS
// and ignores HTTPS_PROXY, hop-by-hop headers (including every header
// named in Connection) are stripped both ways, and redirects are passed
// back, never followed.
//
// # Security
//
// Denials are 4xx with a JSON body {"error": code, "detail": …} and an
// X-Airlock-Error header; the detail names the check and the field, never
// a value the plugin sent. Unknown, expired and revoked handles all answer
// 403 handle_invalid; the audit line says which. Audit lines carry the
// handle's fingerprint, the path without query values, and the secret's
// version — never a secret, a handle or a query value.
//
// # Concurrency
//
// Server is safe for concurrent use; per-request state lives in the
// request's RoundTripper.
package proxy
