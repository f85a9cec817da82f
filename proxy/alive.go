package proxy

import (
	"errors"
	"net"
	"syscall"
)

// socketIdle peeks at c's socket without blocking or consuming anything:
// true when no byte is waiting and the peer has not closed it. A
// connection whose state cannot be read this way counts as not idle.
func socketIdle(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	idle := false
	var buf [1]byte
	cerr := rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		idle = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return cerr == nil && idle
}
