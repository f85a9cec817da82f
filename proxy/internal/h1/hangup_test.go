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

// The watch is kept from one request to the next on a connection (one
// without a body reuses the last one's watch and timer when its timer
// never fired): every request on a kept-alive connection is watched
// afresh, after quick requests and after one whose watch started
// reading, and a quick request's context ends with the request, not
// with a hangup.
func TestHangupWatchAcrossRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := map[string]error{}
		release := make(chan struct{})
		client, done := serveLoop(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/slow":
				<-release
			case "/hang":
				<-r.Context().Done()
			}
			causes[r.URL.Path] = context.Cause(r.Context())
			io.WriteString(w, r.URL.Path)
		}, time.Minute)
		br := bufio.NewReader(client)
		for _, p := range []string{"/a", "/b", "/slow", "/c", "/hang"} {
			io.WriteString(client, rawGet(p))
			if p == "/hang" {
				break
			}
			if p == "/slow" {
				time.Sleep(2 * hangupAfter) // the watch is reading
				synctest.Wait()
				close(release)
			}
			if got := readResponseBody(t, br); got != p {
				t.Fatalf("%s answered %q", p, got)
			}
		}
		time.Sleep(2 * hangupAfter)
		synctest.Wait()
		client.Close()
		<-done
		for _, p := range []string{"/a", "/b", "/slow", "/c"} {
			if causes[p] != nil {
				t.Errorf("%s: its context had ended in the handler: %v", p, causes[p])
			}
		}
		if causes["/hang"] != ErrClientGone {
			t.Fatalf("the last request's context ended with %v, want %v", causes["/hang"], ErrClientGone)
		}
	})
}

// A request without a body takes the last one's stopped watch instead
// of allocating a watch and a timer.
func TestHangupWatchReused(t *testing.T) {
	c := &Conn{ctx: context.Background(), br: bufio.NewReader(nil)}
	req := httptestGet()
	_, w := c.watchHangup(req, nil)
	w.stop()
	if c.spareWatch != w {
		t.Fatal("a stopped watch whose timer never fired was not kept")
	}
	_, w2 := c.watchHangup(req, nil)
	if w2 != w || c.spareWatch != nil {
		t.Fatal("the next request did not take the kept watch")
	}
	if w2.stopped || w2.ready != true || !w2.reuse {
		t.Fatalf("the kept watch was not reset: %+v", w2)
	}
	w2.stop()
	allocs := testing.AllocsPerRun(100, func() {
		_, w := c.watchHangup(req, nil)
		w.stop()
	})
	// The request's context (WithCancelCause: 2) and its copy of the
	// request (WithContext: 1) remain.
	if allocs > 3 {
		t.Errorf("a watched request allocates %v times", allocs)
	}
	// A request with a body never hands its watch on: its body's reader
	// may end on another goroutine.
	_, w3 := c.watchHangup(req, &reqBody{})
	w3.stop()
	if c.spareWatch != nil {
		t.Fatal("a watch of a request with a body was kept")
	}
}

func httptestGet() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://api.example.com/", nil)
	return r
}

// A WebSocket handler that takes the connection over from a request
// holding the previous request's watch, after that watch started
// reading and took a byte the client sent to the new protocol, gets the
// byte back first; the watch is not kept for a next request.
func TestHijackWithReusedWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first *hangupWatch
		var loop *Conn
		release := make(chan struct{})
		client, done := serveLoop(t, func(w http.ResponseWriter, r *http.Request) {
			c := ConnOf(w)
			if r.URL.Path == "/a" {
				first = c.watch
				io.WriteString(w, "a")
				return
			}
			if c.watch != first {
				t.Error("the upgrade did not take the last request's watch")
			}
			<-release
			conn, _ := c.Hijack()
			b := make([]byte, 1)
			if _, err := io.ReadFull(conn, b); err != nil {
				t.Error(err)
			}
			io.WriteString(conn, "got "+string(b))
			loop = c
		}, time.Minute)
		br := bufio.NewReader(client)
		io.WriteString(client, rawGet("/a"))
		if got := readResponseBody(t, br); got != "a" {
			t.Fatalf("/a answered %q", got)
		}
		io.WriteString(client, rawGet("/ws"))
		time.Sleep(2 * hangupAfter) // the bubble's clock: the watch is reading
		synctest.Wait()
		go io.WriteString(client, "x") // taken by the watch
		synctest.Wait()
		first.mu.Lock()
		took := first.got
		first.mu.Unlock()
		if !took {
			t.Fatal("the watch did not take the byte")
		}
		close(release)
		got := make([]byte, len("got x"))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "got x" {
			t.Fatalf("the taken-over connection answered %q, %v", got, err)
		}
		client.Close()
		<-done
		if loop.spareWatch != nil {
			t.Error("a paused watch was kept for a next request")
		}
	})
}
