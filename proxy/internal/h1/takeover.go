package h1

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"time"
)

// The loop's side of the handlers that take a client connection over: a
// CONNECT tunnel (and HTTP/2 inside it) and a WebSocket.
// They reach the connection through these methods only.

// ConnOf is the client connection w writes to, or nil when w is not the
// loop's ResponseWriter (an HTTP/2 stream's).
func ConnOf(w http.ResponseWriter) *Conn {
	if rw, ok := w.(*respWriter); ok {
		return rw.c
	}
	return nil
}

// Context is the connection's context: it ends when a shutdown's grace
// is over.
func (c *Conn) Context() context.Context { return c.ctx }

// Timeouts are the loop's read_header_timeout and idle_timeout.
func (c *Conn) Timeouts() (readHeader, idle time.Duration) {
	return c.cs.ReadHeaderTimeout, c.cs.IdleTimeout
}

// Hijack takes the connection over from the loop, which closes it once
// the handler returns: the hangup watch stops, and what the loop read
// ahead comes first from the returned reader (and a byte the watch read
// from the returned connection); its writer writes through the loop's
// buffer.
func (c *Conn) Hijack() (net.Conn, *bufio.ReadWriter) {
	c.watch.pause()
	c.w.hijacked = true
	conn := net.Conn(c.conn)
	if len(c.lr.unread) > 0 {
		conn = &prefixConn{Conn: c.conn, pre: c.lr.unread}
		c.lr.unread = nil
	}
	return conn, bufio.NewReadWriter(c.br, c.bw)
}

// ServeInner serves the requests read on nc, the connection inside c's
// CONNECT tunnel, until it closes; ctx is its context, and admit vets
// each request before the handler sees it. It is idle or busy on c's
// behalf for shutdown.
func (c *Conn) ServeInner(nc net.Conn, ctx context.Context, admit func(*http.Request) *http.Response) {
	inner := newConn(c.cs, nc, ctx)
	inner.outer = c
	inner.admit = admit
	inner.serve()
}

// SetBusy marks c as serving a request (an HTTP/2 stream of its tunnel):
// shutdown then lets it finish. SetIdle (listener.go) undoes it.
func (c *Conn) SetBusy() { c.idleFlag().Store(false) }

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
