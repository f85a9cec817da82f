package proxy

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"time"
)

// The loop's side of the handlers that take a client connection over: a
// CONNECT tunnel (intercept.go, h2.go) and a WebSocket (websocket.go).
// They reach the connection through these methods only.

// connOf is the client connection w writes to, or nil when w is not the
// loop's ResponseWriter (an HTTP/2 stream's).
func connOf(w http.ResponseWriter) *clientConn {
	if rw, ok := w.(*respWriter); ok {
		return rw.c
	}
	return nil
}

// context is the connection's context: it ends when a shutdown's grace
// is over.
func (c *clientConn) context() context.Context { return c.ctx }

// timeouts are the loop's read_header_timeout and idle_timeout.
func (c *clientConn) timeouts() (readHeader, idle time.Duration) {
	return c.cs.readHeaderTimeout, c.cs.idleTimeout
}

// hijack takes the connection over from the loop, which closes it once
// the handler returns: the hangup watch stops, and what the loop read
// ahead comes first from the returned reader (and a byte the watch read
// from the returned connection); its writer writes through the loop's
// buffer.
func (c *clientConn) hijack() (net.Conn, *bufio.ReadWriter) {
	c.watch.pause()
	c.w.hijacked = true
	conn := net.Conn(c.conn)
	if len(c.lr.unread) > 0 {
		conn = &prefixConn{Conn: c.conn, pre: c.lr.unread}
		c.lr.unread = nil
	}
	return conn, bufio.NewReadWriter(c.br, c.bw)
}

// serveInner serves the requests read on nc, the connection inside c's
// CONNECT tunnel, until it closes; ctx is its context, and admit vets
// each request before the handler sees it. It is idle or busy on c's
// behalf for shutdown.
func (c *clientConn) serveInner(nc net.Conn, ctx context.Context, admit func(*http.Request) *http.Response) {
	inner := newClientConn(c.cs, nc, ctx)
	inner.outer = c
	inner.admit = admit
	inner.serve()
}

// setBusy marks c as serving a request (an HTTP/2 stream of its tunnel):
// shutdown then lets it finish. setIdle (listener.go) undoes it.
func (c *clientConn) setBusy() { c.idleFlag().Store(false) }

// prefixConn reads pre before the connection.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
