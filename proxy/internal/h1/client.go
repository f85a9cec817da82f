package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// ClientConn is one HTTP/1.1 connection to an upstream, used for one
// request at a time on the calling goroutine: the request is written by
// WriteRequest and the response read by ReadResponse, with no read or
// write goroutine (http.Transport keeps one of each per connection, and
// at a proxy's request rates their hand-offs were a quarter of its CPU).
// Dialing, TLS, pooling and retries are the caller's: they depend on
// whom a request is sent for.
type ClientConn struct {
	conn  net.Conn // what requests are written to (TLS over raw)
	br    *bufio.Reader
	bw    *bufio.Writer
	probe *IdleProbe   // the socket under conn, checked before each reuse
	guard *guardedConn // raw, when made by Guard
}

// NewClientConn makes a client connection of conn; raw is the socket
// under it (conn itself when there is no TLS), for Alive's probe: for a
// TLS connection, Guard's wrapping of the socket it was made over.
func NewClientConn(conn, raw net.Conn) *ClientConn {
	c := &ClientConn{conn: conn, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 16<<10)}
	if g, ok := raw.(*guardedConn); ok {
		c.guard, raw = g, g.Conn
	}
	c.probe = NewIdleProbe(raw)
	return c
}

// Guard wraps raw, the socket a TLS client connection is about to be
// made over, for NewClientConn: Alive then looks into the TLS layer by
// having the socket refuse reads for that moment, instead of setting a
// read deadline in the past and clearing it (two timer updates and an
// error allocated on every reuse of a pooled connection).
func Guard(raw net.Conn) net.Conn { return &guardedConn{Conn: raw} }

// guardedConn is a socket under a TLS client connection. While refusing
// is set (only by Alive, on the goroutine that owns the connection),
// a read returns errRefused at once and touches nothing. It follows the
// TLS records the bytes it passes on make up: a record begun but not
// whole waits in the TLS layer as ciphertext that no look can decrypt.
type guardedConn struct {
	net.Conn
	refusing bool
	hdr      [5]byte // the next record's header, nhdr bytes of it read
	nhdr     int
	rest     int // bytes of the current record's body still to come
}

func (g *guardedConn) Read(p []byte) (int, error) {
	if g.refusing {
		return 0, errRefused
	}
	n, err := g.Conn.Read(p)
	g.follow(p[:n])
	return n, err
}

// follow moves over b, the next bytes of the record stream (every byte a
// TLS client reads is in a record: a 5-byte header whose last two bytes
// are the length of the body after it).
func (g *guardedConn) follow(b []byte) {
	for len(b) > 0 {
		if g.rest > 0 {
			k := min(g.rest, len(b))
			g.rest -= k
			b = b[k:]
			continue
		}
		k := copy(g.hdr[g.nhdr:], b)
		g.nhdr += k
		b = b[k:]
		if g.nhdr == len(g.hdr) {
			g.nhdr, g.rest = 0, int(g.hdr[3])<<8|int(g.hdr[4])
		}
	}
}

// midRecord reports whether the bytes read end inside a record.
func (g *guardedConn) midRecord() bool { return g.nhdr > 0 || g.rest > 0 }

// errRefused is what a guarded socket's read returns while Alive looks:
// a temporary timeout, as an expired deadline's error is, so that
// crypto/tls keeps the connection usable and keeps any partial record.
var errRefused error = refusedError{}

type refusedError struct{}

func (refusedError) Error() string   { return "h1: read refused while checking an idle connection" }
func (refusedError) Timeout() bool   { return true }
func (refusedError) Temporary() bool { return true }

// Close closes the connection.
func (c *ClientConn) Close() error { return c.conn.Close() }

// Buffered reports whether bytes past the last response were read: a
// connection with any must not carry another request.
func (c *ClientConn) Buffered() bool { return c.br.Buffered() > 0 }

// Alive reports whether an idle connection may carry a request. Nothing
// may arrive on an idle connection, so any byte waiting (a
// close_notify, junk) or the end of the stream means it must not.
func (c *ClientConn) Alive() bool {
	if c.br.Buffered() > 0 || !c.probe.Idle() {
		return false
	}
	// Plaintext the TLS layer decrypted but br did not take (a record
	// split at a response's end), or a whole record it read off the
	// socket, is in neither place: a read that cannot wait finds it. A
	// read timeout leaves tls.Conn usable. The TLS layer reads past whole
	// records only once it has none left, so a refused read with the
	// bytes read ending inside a record means the start of a record
	// waits in it: bytes sent past the response too.
	if g := c.guard; g != nil {
		g.refusing = true
		_, err := c.br.Peek(1)
		g.refusing = false
		return errors.Is(err, errRefused) && !g.midRecord()
	}
	_ = c.conn.SetReadDeadline(time.Unix(1, 0)) // long past: the read returns at once
	_, err := c.br.Peek(1)
	_ = c.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// RoundTrip writes req and reads the head of its response, skipping
// interim (1xx) responses; respTimeout, when positive, bounds the wait
// for the head. The request's context ending unblocks any read or
// write. reuse is called when the response's body is closed after it
// was read to the end, the response did not ask to close, and the
// context did not end: the connection may carry another request. On
// any other close, and on an error, the connection is closed (for an
// error, by the caller).
func (c *ClientConn) RoundTrip(req *http.Request, respTimeout time.Duration, reuse func()) (*http.Response, error) {
	stop := context.AfterFunc(req.Context(), func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	if err := WriteRequest(c.bw, req); err != nil {
		stop()
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		stop()
		return nil, err
	}
	if respTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(respTimeout))
	}
	var resp *http.Response
	var err error
	for {
		resp, err = ReadResponse(c.br, req)
		if err != nil {
			stop()
			return nil, err
		}
		// Interim responses (100 Continue, 103 Early Hints) precede the
		// real one; a protocol switch is never asked for (the proxy
		// strips Upgrade), so it is an error.
		if resp.StatusCode == http.StatusSwitchingProtocols {
			stop()
			return nil, fmt.Errorf("upstream switched protocols unasked")
		}
		if resp.StatusCode >= 200 || resp.StatusCode < 100 {
			break
		}
	}
	_ = c.conn.SetReadDeadline(time.Time{})
	resp.Body = &clientBody{rc: resp.Body, c: c, reuse: reuse, stop: stop, reusable: !resp.Close,
		eof: resp.Body == http.NoBody}
	return resp, nil
}

// clientBody hands its connection back through reuse at EOF, and closes
// it if the body is abandoned before the end.
type clientBody struct {
	rc       io.ReadCloser
	c        *ClientConn
	reuse    func()
	stop     func() bool
	reusable bool
	eof      bool
	once     sync.Once
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *clientBody) Close() error {
	var err error
	b.once.Do(func() {
		if !b.stop() {
			// The request's context ended: the deadline is poisoned.
			b.reusable = false
		}
		if b.eof && b.reusable {
			err = b.rc.Close()
			b.reuse()
			return
		}
		// Close the connection first: the body's Close would otherwise
		// read the rest of an abandoned response.
		b.c.conn.Close()
		_ = b.rc.Close()
	})
	return err
}
