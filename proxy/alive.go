package proxy

import (
	"errors"
	"net"
	"syscall"
)

// idleProbe peeks at a connection's socket without blocking or consuming
// anything. It is made once per connection, so that a check allocates
// nothing: every reuse of a pooled upstream connection runs one.
type idleProbe struct {
	rc   syscall.RawConn // nil: the state cannot be read, never idle
	fn   func(fd uintptr) bool
	idle bool
	buf  [1]byte
}

func newIdleProbe(c net.Conn) *idleProbe {
	p := &idleProbe{}
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

// check reports whether no byte is waiting on the socket and the peer has
// not closed it. A connection whose state cannot be read this way counts
// as not idle.
func (p *idleProbe) check() bool {
	if p.rc == nil {
		return false
	}
	p.idle = false
	return p.rc.Read(p.fn) == nil && p.idle
}
