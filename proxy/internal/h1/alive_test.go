package h1

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair is a loopback TCP connection: the probed end and its peer.
func tcpPair(t *testing.T) (probed, peer net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	probed, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { probed.Close(); peer.Close() })
	return probed, peer
}

// waitNotIdle waits until the probe sees what the peer did cross
// loopback (no speed asserted).
func waitNotIdle(t *testing.T, p *IdleProbe, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); p.Idle(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never seen by the check", what)
		}
	}
}

// Every reuse of a pooled upstream connection checks its socket (the
// proxy's upstream client); the check is made once per connection so
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
	waitNotIdle(t, p, "bytes sent on an idle connection")
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "HTTP" {
		t.Fatalf("after the check the connection reads %q, %v: the check consumed a byte", got, err)
	}

	c2, peer2 := tcpPair(t)
	p2 := NewIdleProbe(c2)
	peer2.Close()
	waitNotIdle(t, p2, "the peer's close")

	if (&IdleProbe{}).Idle() {
		t.Error("a probe that cannot read the socket's state calls it idle")
	}
	if NewIdleProbe(&memConn{}).Idle() {
		t.Error("a connection with no socket is called idle")
	}
}
