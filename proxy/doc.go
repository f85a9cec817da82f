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
// Client connections are served by the proxy's own HTTP/1.1 loop
// (conn.go, respwriter.go, listener.go, hangup.go): requests are held to
// net/http's server checks plus the proxy's own against smuggling; a
// response is framed as net/http frames it. The loop knows nothing of
// the checks: it runs the Server as an http.Handler and reaches the rest
// of the proxy only through its seams (clientloop.go) — a log, a
// callback that audits and answers what the loop refuses before any
// handler sees it, named by the loop's own reasons, and a tunnel
// connection's admit callback (intercept.go). The handlers that take a
// connection over (a CONNECT tunnel, HTTP/2 inside it, a WebSocket) do
// so through the loop's takeover methods only (takeover.go). A plain head already whole in the
// connection's buffer — HTTP/1.1, CRLF lines, token names, one Host, no
// Transfer-Encoding, at most one Content-Length — is read by the proxy's
// own parser (headparse.go, headfast.go), which copies the head once and
// allocates a third of what net/textproto does; any other head, and any
// byte that parser is not sure of, goes to http.ReadRequest from the same
// bytes, so the fast path never accepts what the slow one refuses. The
// upstream's response head is read the same way, falling back to
// http.ReadResponse. Every place the proxy reads or writes HTTP by hand
// (both fast paths, the Host header, header names, the head's length, the
// response written to the client, the request written upstream) has a
// differential fuzz target against net/http. Each request then takes
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
// the exchange and let a path skip a check. The HTTP/1.1 loop and the
// upstream client share no exchange (the loop's seams are above), and
// are the next to move into a package of their own.
package proxy
