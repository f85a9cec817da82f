package h1

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// tcpPair is a loopback TCP connection: the probed end and its peer.
func tcpPair(t *testing.T) (probed, peer net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	probed, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil {
		probed.Close()
		t.Fatal(a.err)
	}
	t.Cleanup(func() { probed.Close(); a.c.Close() })
	return probed, a.c
}

// waitReadable blocks in the runtime's poller until c's socket has a
// byte to read or its peer's close (what the peer did has crossed
// loopback), consuming nothing. The deadline only bounds a broken run;
// no speed is asserted and nothing sleeps.
func waitReadable(t *testing.T, c net.Conn, what string) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK)
	})
	if err != nil {
		t.Fatalf("%s never reached the socket: %v", what, err)
	}
}

// Every reuse of a pooled upstream connection checks its socket
// (ClientConn.Alive); the check is made once per connection so
// that it allocates nothing per request, it sees bytes the upstream sent
// while the connection was idle and the upstream's close, and it
// consumes nothing.
func TestIdleProbe(t *testing.T) {
	c, peer := tcpPair(t)
	p := NewIdleProbe(c)
	if !p.Idle() {
		t.Fatal("a connection with nothing sent on it is not idle")
	}
	if n := testing.AllocsPerRun(100, func() { p.Idle() }); n != 0 {
		t.Errorf("a socket check allocates %v times", n)
	}
	if _, err := io.WriteString(peer, "HTTP/1.1 200 OK\r\n"); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, c, "bytes sent on an idle connection")
	if p.Idle() {
		t.Fatal("a connection with bytes waiting is called idle")
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "HTTP" {
		t.Fatalf("after the check the connection reads %q, %v: the check consumed a byte", got, err)
	}

	c2, peer2 := tcpPair(t)
	p2 := NewIdleProbe(c2)
	if err := peer2.Close(); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, c2, "the peer's close")
	if p2.Idle() {
		t.Fatal("a connection its peer closed is called idle")
	}

	if (&IdleProbe{}).Idle() {
		t.Error("a probe that cannot read the socket's state calls it idle")
	}
	if NewIdleProbe(&testenv.MemConn{}).Idle() {
		t.Error("a connection with no socket is called idle")
	}
}
