// Package h1 is the egress proxy's HTTP/1.1 engine: the loop that serves
// client connections, and the wire format of the requests the proxy
// re-originates upstream and of the responses it reads back. It knows
// nothing of handles, destinations or audit; the proxy reaches it
// through the seams below and it reaches the proxy only through them.
//
// # Server side
//
// Server is the loop for one listener (listener.go, conn.go). It runs
// its Handler for each request read and hands back, through Refuse,
// what it refuses before any handler sees it, named by a RefuseCode and
// a reason (never a value the client sent); the proxy audits and answers
// those. Requests are held to net/http's server checks plus two against
// smuggling (Transfer-Encoding with Content-Length; a raw Host that must
// agree with an absolute-form target), and a response is framed as
// net/http frames it (respwriter.go). A plain head already whole in the
// connection's buffer is read by the package's own parser (headfast.go,
// headparse.go), which copies the head once and allocates a third of
// what net/textproto does; any other head, and any byte that parser is
// not sure of, goes to http.ReadRequest from the same bytes, so the fast
// path never accepts what the slow one refuses.
//
// A handler that takes its connection over — a CONNECT tunnel, HTTP/2
// inside one, a WebSocket — finds it with ConnOf and uses only Conn's
// methods (takeover.go): Hijack, ServeInner for the requests inside a
// tunnel (each vetted by an admit callback), SetBusy and SetIdle for
// shutdown. A client that hangs up while its request waits upstream
// cancels the request's context with ErrClientGone (hangup.go).
//
// # Client side
//
// ClientConn is one upstream connection, carrying one request at a time
// on the caller's goroutine (client.go): WriteRequest writes the request
// in origin-form (request.go); ReadResponse reads the answer, by the
// fast path when its head is whole in the buffer, else by
// http.ReadResponse (headfast.go); the body hands the connection back
// through the caller's reuse callback only when read to its end; and
// Alive, with an IdleProbe of the socket (alive.go), tells whether an
// idle connection received anything. Dialing, TLS, pooling, retries and
// the address policy are the proxy's: they depend on whom a request is
// sent for.
//
// # Security
//
// Every place the package reads or writes HTTP by hand has a
// differential fuzz target against net/http with a committed corpus:
// FuzzRequestHead and FuzzFastRequest (request heads), FuzzScanHead (the
// raw Host), FuzzHeaderBlock (header lines), FuzzFastResponse (response
// heads), FuzzAppendHeaderValue (a value never splits a head) and
// FuzzWriteRequest (the request written upstream, read back by
// net/http). The response written to a client is held to net/http's by
// the proxy's FuzzResponseWrite, through the relay that feeds it.
//
// # Concurrency
//
// Server.Serve runs one goroutine per connection and returns after every
// one has ended: on cancellation it closes idle connections, lets
// requests in flight finish for up to serve.ShutdownGrace, then closes
// the rest. A request in flight longer than 100 ms gets one goroutine
// that watches for the client's hangup; no other goroutine is started
// per request.
package h1
