package h1

import (
	"errors"
	"net"
	"syscall"
)

// IdleProbe peeks at a connection's socket without blocking or consuming
// anything. It is made once per connection, so that a check allocates
// nothing: every reuse of a pooled upstream connection runs one.
type IdleProbe struct {
	rc   syscall.RawConn // nil: the state cannot be read, never idle
	fn   func(fd uintptr) bool
	idle bool
	buf  [1]byte
}

// NewIdleProbe makes the probe for c, the socket under a connection
// (a TLS connection's raw one).
func NewIdleProbe(c net.Conn) *IdleProbe {
	p := &IdleProbe{}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			p.rc = rc
		}
	}
	p.fn = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.idle = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
		return true // never wait for readiness
	}
	return p
}

// Idle reports whether no byte is waiting on the socket and the peer has
// not closed it. A connection whose state cannot be read this way counts
// as not idle.
func (p *IdleProbe) Idle() bool {
	if p.rc == nil {
		return false
	}
	p.idle = false
	return p.rc.Read(p.fn) == nil && p.idle
}
