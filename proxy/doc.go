// Package proxy is Airlock's egress proxy: the only way out for a plugin.
//
// A plugin's request carries a credential handle. The proxy resolves the
// handle with the broker, checks the destination against what the
// plugin's manifest and the intent binding allow, fetches the secret,
// injects it as the binding says (a header, basic auth, a query
// parameter, a placeholder the plugin put where an API key goes, or a
// processor: HMAC, AWS SigV4, OAuth2 access tokens), and re-originates
// the request over verified TLS — only to a public address that is not
// the proxy itself, checked at connect time. Responses come back with the
// secret redacted if the upstream echoed it (the echo guard).
//
// # Two modes, one request path
//
// A plain request is absolute-form HTTP (GET http://api.example.com/x,
// with HTTP_PROXY); the proxy adds TLS. With proxy.intercept configured,
// a CONNECT carrying a live handle or the plugin's pass, whose grant
// declares the host and port, opens a tunnel: the proxy terminates TLS
// with a leaf from its intercept CA and reads the requests inside
// (HTTP/1.1, or HTTP/2 streams when the client picks h2 by ALPN, as gRPC
// clients do). Each is turned into the absolute-form request it stands for and
// goes through exactly the same path as a plain one: handle, target,
// destination, the decision limits (residency, access grant, budget:
// enforce.go), limits, secret, injection, the scan that refuses a handle
// left anywhere injection does not replace it (head, body, gRPC and
// WebSocket messages: handlescan.go, bodyscan.go), dial, echo guard,
// audit.
//
// # Design
//
// The HTTP/1.1 wire is the engine in proxy/internal/h1: the loop that
// serves client connections, the head parsers, the response writer, the
// hangup watch, and the client side — the request written upstream, the
// response read back, an idle pooled connection's liveness check. It
// knows nothing of the checks: the loop runs the Server as an
// http.Handler and reaches the rest of the proxy only through its seams
// (clientloop.go) — a log, a callback that audits and answers what the
// loop refuses before any handler sees it, named by the loop's own
// reasons, and a tunnel connection's admit callback (intercept.go); the
// handlers that take a connection over (a CONNECT tunnel, HTTP/2 inside
// it, a WebSocket) do so through the loop's takeover methods only; the
// upstream client (upstream.go) drives an h1.ClientConn per pooled
// connection. Requests are held to net/http's server checks plus two
// against smuggling; a response is framed as net/http frames it; a
// plain head already whole in the buffer is read by h1's own parser,
// and any head it is not sure of by http.ReadRequest (or
// http.ReadResponse upstream) from the same bytes. Every place the
// proxy reads or writes HTTP by hand has a differential fuzz target
// against net/http with a committed corpus: in h1, the loop's reading of
// a request head against net/http's server (FuzzRequestHead), both head
// fast paths (FuzzFastRequest, FuzzFastResponse, FuzzHeaderBlock), the
// Host header (FuzzScanHead), and the request written upstream
// (FuzzWriteRequest: written, read back by http.ReadRequest, and
// compared with what went in and with what (*http.Request).Write sends
// for it), while FuzzAppendHeaderValue holds that no header value
// written splits a head; here, the response written to the client
// through the relay (FuzzResponseWrite). Dialing and the address policy (dial.go,
// address.go) and the pools keyed by whom a request is sent for
// (upstream_pool.go, h2pool.go) are the proxy's: they are checks, and
// depend on the credential. Each request then takes
// the proxy's own path (forward.go): the checks and injection (prepare),
// the trip upstream (exchange), the response relayed with its trailers;
// proxy headers are stripped by the proxy itself, redirects are passed
// back, never followed. Requests go upstream through the proxy's own
// pooled HTTP/1.1 client (upstream.go) on the calling goroutine, never
// through HTTPS_PROXY; a request that came as HTTP/2 goes on a transport
// that speaks h2 where the upstream offers it (h2.go, h2pool.go). Every
// upstream pool is keyed by destination, plugin and credential
// (upstream_pool.go): an upstream whose framing goes astray can confuse a
// plugin only with itself. An HTTP/2 request is held to what an HTTP/1.1
// request line and Host could carry before anything reads it
// (h2check.go).
//
// # Tenants
//
// Plugins are tenants of each other. Serve takes the shared listener,
// where a handle stands for whoever holds it. ServeSandbox takes one
// plugin's own listener (inside its network namespace, or any TCP
// listener its host made for it alone), named by its host; on it every
// credential a connection presents, in every mode, must be that
// plugin's, or the request is refused with handle_not_this_plugins and
// audited under the plugin that sent it (tenant.go).
//
// # Streams and sockets
//
// An HTTP/2 stream (a gRPC call) and a WebSocket (websocket.go) pass the
// request checks when they start and are then held to their credentials
// while they last (revokewatch.go): a revoked or expired handle or pass
// ends them. Each holds a per-plugin concurrency slot until it ends. The
// echo guard reads gRPC responses (grpcguard.go) and WebSocket messages
// whole, so it never holds a message back; gRPC refusals are statuses a
// client can read (grpcstatus.go).
//
// # Security
//
// Denials are 4xx or 5xx with a JSON body {"error": code, "detail": …}
// and an X-Airlock-Error header; the detail names the check and the
// field, never a value the plugin sent. Unknown, expired and revoked
// handles all answer 403 handle_invalid; the audit line says which. Audit
// lines carry the mode (plain, connect, intercept), the destination host
// and port, the handle's fingerprint, the path without query values, and
// the secret's version — never a secret, a handle or a query value.
//
// # Concurrency
//
// Server is safe for concurrent use. Serve runs one goroutine per client
// connection (a tunnel's requests run on its CONNECT's goroutine) and two
// background loops (the limiter and idle-connection sweeps, the intercept
// CA reload); it returns only after every one of them has ended.
// Per-request state lives in the request's exchange.
//
// # Size
//
// The package is well over 1,500 lines because every request, plain or
// inside an intercepted tunnel, must pass one sequence of checks —
// target, destination, handle, rate limit, injection, SSRF-safe dial,
// echo guard, audit — and those steps share the per-request exchange
// (exchange.go), which the checks, the injection kinds and processors,
// the echo guard, the gRPC and WebSocket guards and the audit record all
// read and write. Each file is one step or one processor (SigV4, OAuth2,
// HMAC, the intercept CA); splitting those into packages would export
// the exchange and let a path skip a check. The HTTP/1.1 engine shares
// no exchange, so it is a package of its own (proxy/internal/h1, whose
// seams are above): the loop cannot reach a check, and a check cannot
// skip the loop.
package proxy
