package h1

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// tlsPair is a TLS connection over loopback TCP made as the proxy makes
// its upstream ones (over Guard's socket): the client's ClientConn and
// the server's end.
func tlsPair(t *testing.T) (*ClientConn, *tls.Conn) {
	t.Helper()
	c, peer := tcpPair(t)
	return tlsPairOver(t, c, peer)
}

// tlsPairOver is tlsPair over c and its peer.
func tlsPairOver(t *testing.T, c, peer net.Conn) (*ClientConn, *tls.Conn) {
	t.Helper()
	ca := testenv.NewCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	guarded := Guard(c)
	tc := tls.Client(guarded, &tls.Config{RootCAs: roots, ServerName: "up.test"})
	ts := tls.Server(peer, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "up.test")}})
	done := make(chan error, 1)
	go func() { done <- ts.Handshake() }()
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return NewClientConn(tc, guarded), ts
}

// Alive looks into the TLS layer through the guarded socket: a record
// sent while the connection was idle makes it not alive whether it is
// still on the socket, in the TLS layer or in the reader's buffer; the
// looks consume nothing and leave the connection usable, and an idle
// look neither sets a deadline nor allocates an error.
func TestClientConnAliveGuardedTLS(t *testing.T) {
	cc, ts := tlsPair(t)
	// TLS 1.3 session tickets arrive after the handshake: take them in
	// (an idle look processes them) before measuring.
	if !cc.Alive() {
		t.Fatal("a fresh TLS connection is not alive")
	}
	if n := testing.AllocsPerRun(100, func() { cc.Alive() }); n > 1 {
		t.Errorf("an idle look allocates %v times, want at most crypto/tls's own one", n)
	}
	if cc.guard.refusing {
		t.Fatal("the socket still refuses reads after a look")
	}
	if _, err := io.WriteString(ts, "HTTP/1.1 200 OK\r\n"); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, cc.guard.Conn, "the stray record")
	if cc.Alive() {
		t.Fatal("a connection with a stray record on its socket is alive")
	}
	// Take one byte past the reader: the rest of the record is decrypted
	// and waits in the TLS layer, with nothing on the socket.
	one := make([]byte, 1)
	if _, err := cc.conn.Read(one); err != nil || one[0] != 'H' {
		t.Fatalf("read %q, %v", one, err)
	}
	if !cc.probe.Idle() || cc.Buffered() {
		t.Fatal("the rest is not only in the TLS layer")
	}
	if cc.Alive() {
		t.Fatal("a connection with plaintext waiting in its TLS layer is alive")
	}
	if cc.Alive() { // now in the reader's buffer
		t.Fatal("a connection with plaintext in its reader's buffer is alive")
	}
	if b, err := cc.br.Peek(3); err != nil || string(b) != "TTP" {
		t.Fatalf("after the looks the connection reads %q, %v", b, err)
	}
	// The conn still carries data both ways.
	if _, err := cc.br.Discard(len("TTP/1.1 200 OK\r\n")); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(ts, "pong") }()
	got := make([]byte, 4)
	if _, err := io.ReadFull(cc.br, got); err != nil || string(got) != "pong" {
		t.Fatalf("after the looks the connection reads %q, %v", got, err)
	}
}

// A TLS record that began to arrive after a response, its rest not yet
// sent, waits in the TLS layer as ciphertext, with nothing buffered and
// nothing on the socket: no look can decrypt it, but it is bytes the
// upstream sent past its response, and the connection is not alive (the
// rest, once it comes, would be read as the answer to the next request).
func TestClientConnAlivePartialRecord(t *testing.T) {
	for _, cut := range []int{1, 4, 5, 12} { // in the record's header, at its end, in its body
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			cc, ts, peer, held := heldTLSPair(t)
			const stray = "HTTP/1.1 200 OK\r\n"
			if _, err := io.WriteString(ts, "ok"); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(ts, stray); err != nil {
				t.Fatal(err)
			}
			first := 5 + (int(held.Held[3])<<8 | int(held.Held[4]))
			// The response's record and the start of the next, in one write.
			deliverOK(t, cc, peer, held.Held[:first+cut], "the record's start")
			if cc.Alive() {
				t.Fatal("a connection with the start of a record in its TLS layer is alive")
			}
			// What reusing it would read: the stray bytes.
			if _, err := peer.Write(held.Held[first+cut:]); err != nil {
				t.Fatal(err)
			}
			line, err := cc.br.ReadString('\n')
			if err != nil || line != stray {
				t.Fatalf("after the looks the connection reads %q, %v", line, err)
			}
		})
	}
}

// A close_notify that came in the same read as the response's last
// record is taken in by the TLS layer with the response: the look finds
// the end of the stream there, with nothing on the socket.
func TestClientConnAliveCloseNotifyInTLSLayer(t *testing.T) {
	cc, ts, peer, held := heldTLSPair(t)
	if _, err := io.WriteString(ts, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := ts.CloseWrite(); err != nil { // close_notify, the socket kept open
		t.Fatal(err)
	}
	_ = peer.SetWriteDeadline(time.Time{}) // CloseWrite ends the socket's writes
	deliverOK(t, cc, peer, held.Held, "the close_notify")
	if cc.Alive() {
		t.Fatal("a connection whose TLS layer holds a close_notify is alive")
	}
}

// deliverOK sends wire (a response whose plaintext is "ok", and what the
// test put after it) to cc in one write, reads the "ok" and checks that
// what came after it, named what, waits only in the TLS layer: nothing
// on the socket, nothing in the reader's buffer.
func deliverOK(t *testing.T, cc *ClientConn, peer net.Conn, wire []byte, what string) {
	t.Helper()
	if _, err := peer.Write(wire); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, cc.guard.Conn, "the response")
	got := make([]byte, 2)
	if _, err := io.ReadFull(cc.br, got); err != nil || string(got) != "ok" {
		t.Fatalf("read %q, %v", got, err)
	}
	if !cc.probe.Idle() || cc.Buffered() {
		t.Fatalf("%s is not only in the TLS layer", what)
	}
}

// heldTLSPair is tlsPairOver a loopback connection whose server side
// holds what it writes from now on (held.Held), the connection's first
// look done: peer is the server's socket, for the test to send the held
// bytes in pieces of its choosing.
func heldTLSPair(t *testing.T) (cc *ClientConn, ts *tls.Conn, peer net.Conn, held *testenv.HeldConn) {
	t.Helper()
	c, peer := tcpPair(t)
	held = &testenv.HeldConn{Conn: peer}
	cc, ts = tlsPairOver(t, c, held)
	if !cc.Alive() {
		t.Fatal("a fresh TLS connection is not alive")
	}
	held.Hold = true
	return cc, ts, peer, held
}
