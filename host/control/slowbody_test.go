package control_test

import (
	"bufio"
	"net/http"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A caller that sends an invocation's headers and then trickles or
// stops its body does not hold the request's goroutine: the body is
// read within the write timeout (per 64 KiB), and the caller has its
// answer, 400, and the connection closed, instead of a goroutine waiting
// on it for as long as it keeps the connection open.
func TestStalledBodyBounded(t *testing.T) {
	_, handler := newChatty(t, nil)
	srv := testenv.StartSmallBuffers(t, handler)
	leaks := testenv.CheckGoroutines(t)
	conn := testenv.SendUnread(t, "tcp", srv.Listener.Addr().String(),
		"POST /v1/invocations HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\n"+
			"Content-Length: 1000\r\n\r\n{\"plugin\":")
	// A bound for the test, not the host's: the host's is 300ms.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("stalled body: %d, want 400", resp.StatusCode)
	}
	conn.Close()
	leaks()
}
