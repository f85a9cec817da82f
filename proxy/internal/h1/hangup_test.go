package h1

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// serveLoop serves one client connection on the HTTP/1.1 loop with h as
// its handler, over an in-memory pipe: in a synctest bubble, the
// loop's deadlines and the hangup watch's timer run on the bubble's
// clock, and synctest.Wait knows when the watch is blocked reading. done
// closes when the loop has returned.
func serveLoop(t *testing.T, h http.HandlerFunc, readHeaderTimeout time.Duration) (client net.Conn, done chan struct{}) {
	cs := &Server{Handler: h, Log: slog.New(slog.DiscardHandler),
		Refuse: func(_ context.Context, r Refusal) *http.Response {
			t.Errorf("the loop refused the request: %v %s", r.Code, r.Reason)
			return &http.Response{StatusCode: http.StatusBadRequest, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}}
		},
		ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: time.Minute, HeaderLimit: 1 << 20,
		conns: map[*Conn]struct{}{}}
	client, server := net.Pipe()
	c := newConn(cs, server, context.Background())
	cs.track(c)
	done = make(chan struct{})
	go func() { defer close(done); c.serve() }()
	return client, done
}

func rawGet(path string) string {
	return "GET http://api.example.com" + path + " HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
}

// readBody reads one response from br and returns its body.
func readResponseBody(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A client that hangs up while its request is in flight cancels the
// request's context with ErrClientGone once the watch has started.
func TestHangupWatchCancelsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cause error
		client, done := serveLoop(t, func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			cause = context.Cause(r.Context())
		}, time.Minute)
		io.WriteString(client, rawGet("/hangup"))
		time.Sleep(2 * hangupAfter) // the bubble's clock: the watch is reading
		synctest.Wait()
		client.Close()
		<-done
		if cause != ErrClientGone {
			t.Fatalf("the request's context ended with %v, want %v", cause, ErrClientGone)
		}
	})
}

// A client that sends its next request while the first is in flight,
// after the watch started reading, is not taken as gone: the byte the
// watch read is given back and the next request is served whole.
func TestPipelinedRequestSurvivesTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var cause error
		client, done := serveLoop(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/first" {
				<-release
				cause = context.Cause(r.Context())
			}
			io.WriteString(w, r.Method+" "+r.URL.Path)
		}, time.Minute)
		br := bufio.NewReader(client)
		io.WriteString(client, rawGet("/first"))
		time.Sleep(3 * hangupAfter) // the bubble's clock: the watch is reading
		synctest.Wait()
		// The watch takes one byte; the rest waits for the next read.
		go io.WriteString(client, rawGet("/second"))
		synctest.Wait()
		close(release)
		if got := readResponseBody(t, br); got != "GET /first" || cause != nil {
			t.Fatalf("first: %q, its context ended with %v", got, cause)
		}
		if got := readResponseBody(t, br); got != "GET /second" {
			t.Fatalf("second: %q", got)
		}
		client.Close()
		<-done
	})
}
