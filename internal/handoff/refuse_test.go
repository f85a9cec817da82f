package handoff

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A plugin that opens connections during the gap and sends nothing holds
// at most maxRefusing of the host's descriptors: past the bound a
// connection is closed without an answer, and once one is released the
// next request is answered again.
func TestRefusingIsBounded(t *testing.T) {
	old := refuseReadTimeout
	refuseReadTimeout = 10 * time.Minute // the idle ones must stay held
	t.Cleanup(func() { refuseReadTimeout = old })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := Refuse(l)
	var idle []net.Conn
	for range maxRefusing {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	ask := func() (int, error) {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Accepts are in order: every idle connection is held before this one.
	if code, err := ask(); err == nil {
		t.Fatalf("a connection past the bound was answered %d", code)
	}
	idle[0].Close()
	// The released slot comes back once its connection's refusal returns.
	for {
		code, err := ask()
		if err == nil {
			if code != http.StatusServiceUnavailable {
				t.Fatalf("answered %d", code)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range idle[1:] {
		c.Close()
	}
	r.Stop()
}
