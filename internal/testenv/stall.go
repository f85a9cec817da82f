//go:build linux

package testenv

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// What a client that stops reading looks like to a server: small socket
// buffers on both ends, so that the server's writes find them full soon.

// SmallSendBuffers is l with each accepted TCP connection's send buffer
// made small (4 KiB), so that a client that stops reading fills it soon.
func SmallSendBuffers(l net.Listener) net.Listener { return smallListener{l} }

type smallListener struct{ net.Listener }

func (l smallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// StartSmallBuffers serves h on loopback with SmallSendBuffers until the
// test ends.
func StartSmallBuffers(tb testing.TB, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = SmallSendBuffers(srv.Listener)
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv
}

// SendUnread dials addr on network with a small receive buffer (4 KiB)
// and sends req on the connection, which the caller then leaves unread;
// it is closed when the test ends.
func SendUnread(tb testing.TB, network, addr, req string) net.Conn {
	tb.Helper()
	conn, err := net.Dial(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if c, ok := conn.(interface{ SetReadBuffer(int) error }); ok {
		_ = c.SetReadBuffer(4 << 10)
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		tb.Fatal(err)
	}
	return conn
}

// ReadSlowly reads r as a slow but steady client does, 32 KiB every
// 100 ms, until it has limit bytes or the read fails; it returns how
// many it read.
func ReadSlowly(r io.Reader, limit int) int {
	total := 0
	b := make([]byte, 32<<10)
	for total < limit {
		n, err := io.ReadFull(r, b)
		total += n
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return total
}
