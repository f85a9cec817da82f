//go:build linux

package testenv

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// MemConn is a connection whose reads come from a fixed input and whose
// writes are collected: the one connection a fuzz target or a
// differential test hands a server. Close reports on Done.
type MemConn struct {
	r    *bytes.Reader
	mu   sync.Mutex
	out  bytes.Buffer
	once sync.Once
	done chan struct{}
}

// NewMemConn is a MemConn that reads in.
func NewMemConn(in string) *MemConn {
	return &MemConn{r: bytes.NewReader([]byte(in)), done: make(chan struct{})}
}

func (c *MemConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *MemConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *MemConn) Close() error                     { c.once.Do(func() { close(c.done) }); return nil }
func (c *MemConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 18080} }
func (c *MemConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }
func (c *MemConn) SetDeadline(time.Time) error      { return nil }
func (c *MemConn) SetReadDeadline(time.Time) error  { return nil }
func (c *MemConn) SetWriteDeadline(time.Time) error { return nil }

// Reset makes the connection read in from its start again.
func (c *MemConn) Reset(in []byte) { c.r.Reset(in) }

// Done is closed when the connection is.
func (c *MemConn) Done() <-chan struct{} { return c.done }

// Written is a copy of what was written so far.
func (c *MemConn) Written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// MemListener hands a server its one connection, then blocks until
// closed.
type MemListener struct {
	c      net.Conn
	once   sync.Once
	closed chan struct{}
}

// NewMemListener is a listener whose one connection is c.
func NewMemListener(c net.Conn) *MemListener {
	return &MemListener{c: c, closed: make(chan struct{})}
}

// Accept returns the connection once; a server calls it from one
// goroutine.
func (l *MemListener) Accept() (net.Conn, error) {
	if c := l.c; c != nil {
		l.c = nil
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *MemListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *MemListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// ServeNetHTTP runs net/http's server with h on one connection that
// carries in, and returns what the server wrote.
func ServeNetHTTP(h http.Handler, in string) []byte {
	c := NewMemConn(in)
	l := NewMemListener(c)
	srv := &http.Server{Handler: h, MaxHeaderBytes: 1 << 20, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() { _ = srv.Serve(l); close(served) }()
	<-c.Done()
	l.Close()
	_ = srv.Close()
	<-served
	return c.Written()
}
