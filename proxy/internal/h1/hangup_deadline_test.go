package h1

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// A request without a body that outlasts the read deadline its head
// was read under (read_header_timeout for a connection's first request,
// idle_timeout after) is not taken for a hung-up client: the hangup
// watch's read must not inherit that deadline, or a long GET (a stream
// of events, a slow report) is cut off as client_closed_request while
// its client still reads.
func TestLongGetOutlastsHeadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const readHeaderTimeout = 300 * time.Millisecond
		var cause error
		client, done := serveLoop(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "first;")
			w.(http.Flusher).Flush()
			// The bubble's clock: past the head's deadline, and past
			// the hangup watch's start.
			time.Sleep(3 * readHeaderTimeout)
			cause = context.Cause(r.Context())
			io.WriteString(w, "second;")
		}, readHeaderTimeout)
		io.WriteString(client, rawGet("/events"))
		if got := readResponseBody(t, bufio.NewReader(client)); got != "first;second;" || cause != nil {
			t.Fatalf("body %q; the request's context ended with %v: the proxy took the client for gone", got, cause)
		}
		client.Close()
		<-done
	})
}
