//go:build linux

package testenv

import "net"

// HeldConn keeps what is written to it while Hold is set (in Held),
// for a test to send it on in pieces of its choosing: a TLS record cut
// where the test wants it, a response and the start of the next in one
// write.
type HeldConn struct {
	net.Conn
	Hold bool
	Held []byte
}

func (h *HeldConn) Write(p []byte) (int, error) {
	if h.Hold {
		h.Held = append(h.Held, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}
