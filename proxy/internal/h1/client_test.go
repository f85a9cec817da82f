package h1

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
)

// ClientConn carries one request at a time: interim responses are
// skipped, a body read to the end hands the connection back for reuse,
// an abandoned one or a response that asks to close does not, and an
// unasked protocol switch is an error. The peer is a plain TCP
// connection that answers with fixed bytes.
func TestClientConn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string
		read   bool // read the body to the end before closing it
		body   string
		reused bool
		err    bool
	}{
		{name: "reused", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", read: true, body: "ok", reused: true},
		{name: "abandoned", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", body: "", reused: false},
		{name: "close asked", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", read: true, body: "ok"},
		{name: "switch unasked", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := tcpPair(t)
			cc := NewClientConn(c, c)
			got := make(chan *http.Request, 1)
			go func() {
				r, err := http.ReadRequest(bufio.NewReader(peer))
				if err == nil {
					_, _ = io.WriteString(peer, tc.answer)
				}
				got <- r
			}()
			req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://api.example.com/p", nil)
			reused := false
			resp, err := cc.RoundTrip(req, 0, func() { reused = true })
			if r := <-got; r == nil || r.URL.Path != "/p" || r.Host != "api.example.com" {
				t.Fatalf("the peer read %+v", r)
			}
			if tc.err {
				if err == nil {
					t.Fatal("an unasked protocol switch was read as a response")
				}
				return
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%v, %v", resp, err)
			}
			var body []byte
			if tc.read {
				body, _ = io.ReadAll(resp.Body)
			}
			resp.Body.Close()
			if string(body) != tc.body || reused != tc.reused {
				t.Fatalf("body %q reused %v, want %q %v", body, reused, tc.body, tc.reused)
			}
			if tc.reused && (!cc.Alive() || cc.Buffered()) {
				t.Fatal("a connection handed back for reuse is not idle")
			}
		})
	}
}

// A connection whose peer sent bytes nobody asked for is not alive,
// whether they reached the reader's buffer or only the socket.
func TestClientConnAliveSeesStrayBytes(t *testing.T) {
	c, peer := tcpPair(t)
	cc := NewClientConn(c, c)
	if !cc.Alive() {
		t.Fatal("a fresh connection is not alive")
	}
	if _, err := io.WriteString(peer, "HTTP/1.1 200 OK\r\n"); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, c, "the stray bytes")
	if cc.Alive() {
		t.Fatal("a connection with stray bytes is alive")
	}
	// Once in the reader's buffer, they still count, and were not
	// consumed by the checks.
	if b, err := cc.br.Peek(4); err != nil || string(b) != "HTTP" {
		t.Fatalf("after the checks the connection reads %q, %v", b, err)
	}
	if !cc.Buffered() || cc.Alive() {
		t.Fatal("a connection with stray bytes in its buffer is alive")
	}
}
