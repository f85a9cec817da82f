package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
)

// rawClient is a hand-driven client connection to the proxy, for what
// client libraries do not send.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, f *fixture) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawClient) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

// response reads one response and its body.
func (r *rawClient) response(method string) (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, &http.Request{Method: method})
	if err != nil {
		r.t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("reading a response body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the proxy closed the connection: EOF, or a
// reset when the proxy closed with unread data in its receive buffer.
func (r *rawClient) closed() bool {
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.br.ReadByte()
	return err != nil && !isTimeout(err)
}

// head is a request head for path on the test upstream with handle h.
func (f *fixture) head(method, path, h string, extra ...string) string {
	host := strings.TrimPrefix(f.url(""), "http://")
	return method + " " + f.url(path) + " HTTP/1.1\r\nHost: " + host + "\r\nProxy-Authorization: Bearer " + h + "\r\n" +
		strings.Join(extra, "") + "\r\n"
}

func TestKeepAliveAndPipelining(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-pipe")
	rc := dialRaw(t, f)
	n := f.up.count()
	// Two requests in one write, then a third on the same connection.
	rc.send(f.head("GET", "/one", h) + f.head("GET", "/two", h))
	for _, want := range []string{"/one", "/two"} {
		resp, body := rc.response("GET")
		if resp.StatusCode != 200 || body != "ok" || resp.Close {
			t.Fatalf("%s: %d %q close=%v", want, resp.StatusCode, body, resp.Close)
		}
	}
	// A stray CRLF after a POST body, as some old clients send, is skipped.
	rc.send(f.head("POST", "/post", h, "Content-Length: 2\r\n") + "hi\r\n")
	if resp, _ := rc.response("POST"); resp.StatusCode != 200 || f.up.last(t).Body != "hi" {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	rc.send(f.head("GET", "/three", h))
	if resp, _ := rc.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("third request: %d", resp.StatusCode)
	}
	if got := f.up.count() - n; got != 4 {
		t.Fatalf("the upstream saw %d requests, want 4", got)
	}
	if f.up.last(t).Path != "/three" {
		t.Fatalf("last upstream path %q", f.up.last(t).Path)
	}
}

func TestChunkedRequestBody(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-chunked")
	rc := dialRaw(t, f)
	rc.send(f.head("POST", "/x", h, "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
	if resp, _ := rc.response("POST"); resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get(HeaderError))
	}
	if got := f.up.last(t).Body; got != "hello world" {
		t.Fatalf("upstream body %q", got)
	}
	// The connection still frames requests correctly afterwards.
	rc.send(f.head("GET", "/after", h))
	if resp, _ := rc.response("GET"); resp.StatusCode != 200 || f.up.last(t).Path != "/after" {
		t.Fatalf("request after a chunked body: %d %s", resp.StatusCode, f.up.last(t).Path)
	}
}

// RFC 9112 §6.1: a request with both Transfer-Encoding and Content-Length
// is a smuggling attempt; it is refused and the connection closed, so
// whatever follows is never read as a request.
func TestSmugglingRefused(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-smuggle")
	n := f.up.count()
	for _, tt := range []struct{ name, extra string }{
		{"TE and CL", "Content-Length: 44\r\nTransfer-Encoding: chunked\r\n"},
		{"CL and TE", "Transfer-Encoding: chunked\r\nContent-Length: 44\r\n"},
		{"unknown TE", "Transfer-Encoding: gzip, chunked\r\n"},
		{"two CL", "Content-Length: 5\r\nContent-Length: 44\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, f)
			rc.send(f.head("POST", "/x", h, tt.extra) + "0\r\n\r\n" + f.head("GET", "/smuggled", h))
			resp, _ := rc.response("POST")
			if resp.StatusCode != 400 || resp.Header.Get(HeaderError) != CodeBadRequest {
				t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get(HeaderError))
			}
			if !rc.closed() {
				t.Fatal("the connection stayed open after a smuggling attempt")
			}
		})
	}
	if f.up.count() != n {
		t.Fatal("a refused request reached the upstream")
	}
	if !strings.Contains(f.audit.String(), "both Transfer-Encoding and Content-Length") {
		t.Fatalf("no audit line names the smuggling attempt:\n%s", f.audit.String())
	}
}

func TestExpectContinue(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-expect")
	rc := dialRaw(t, f)
	rc.send(f.head("POST", "/x", h, "Content-Length: 5\r\nExpect: 100-continue\r\n"))
	tp := textproto.NewReader(rc.br)
	line, err := tp.ReadLine()
	if err != nil || line != "HTTP/1.1 100 Continue" {
		t.Fatalf("interim line %q, %v", line, err)
	}
	if blank, _ := tp.ReadLine(); blank != "" {
		t.Fatalf("interim response has headers: %q", blank)
	}
	rc.send("hello")
	if resp, _ := rc.response("POST"); resp.StatusCode != 200 || f.up.last(t).Body != "hello" {
		t.Fatalf("final response %d, upstream body %q", resp.StatusCode, f.up.last(t).Body)
	}
	if _, ok := f.up.last(t).Header["Expect"]; ok {
		t.Fatal("Expect was forwarded upstream")
	}

	// A refused request is answered without asking for the body; the
	// connection closes because the client may send it anyway.
	rc = dialRaw(t, f)
	rc.send(f.head("POST", "/x", "not-a-handle", "Content-Length: 5\r\nExpect: 100-continue\r\n"))
	if resp, _ := rc.response("POST"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("refused expect-continue request: %d", resp.StatusCode)
	}
	if !rc.closed() {
		t.Fatal("connection kept after an unread expect-continue body")
	}

	rc = dialRaw(t, f)
	rc.send(f.head("POST", "/x", h, "Content-Length: 5\r\nExpect: teapot\r\n"))
	if resp, _ := rc.response("POST"); resp.StatusCode != http.StatusExpectationFailed {
		t.Fatalf("unknown expectation: %d", resp.StatusCode)
	}
}

func TestHTTP10ClosesAfterResponse(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-http10")
	rc := dialRaw(t, f)
	rc.send(strings.Replace(f.head("GET", "/stream", h), "HTTP/1.1", "HTTP/1.0", 1))
	resp, body := rc.response("GET")
	if resp.StatusCode != 200 || body != "chunk 0;chunk 1;chunk 2;" || len(resp.TransferEncoding) != 0 {
		t.Fatalf("%d %q TE=%v", resp.StatusCode, body, resp.TransferEncoding)
	}
	if !rc.closed() {
		t.Fatal("HTTP/1.0 connection left open")
	}
}

// An unread request body keeps the connection only when it is short
// enough to discard; a long one closes it instead of being read in full.
func TestUnreadBody(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-unread")

	rc := dialRaw(t, f)
	rc.send(f.head("POST", "/x", "not-a-handle", "Content-Length: 1000\r\n") + strings.Repeat("a", 1000))
	if resp, _ := rc.response("POST"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("refused POST: %d", resp.StatusCode)
	}
	rc.send(f.head("GET", "/next", h))
	if resp, _ := rc.response("GET"); resp.StatusCode != 200 || f.up.last(t).Path != "/next" {
		t.Fatalf("request after a discarded body: %d", resp.StatusCode)
	}

	rc = dialRaw(t, f)
	rc.send(f.head("POST", "/x", "not-a-handle", "Content-Length: 104857600\r\n") + strings.Repeat("a", 4096))
	if resp, _ := rc.response("POST"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("refused large POST: %d", resp.StatusCode)
	}
	go func() {
		// The client keeps sending; the proxy must not read 100 MiB.
		chunk := []byte(strings.Repeat("a", 64<<10))
		for range 100 {
			if _, err := rc.c.Write(chunk); err != nil {
				return
			}
		}
	}()
	if !rc.closed() {
		t.Fatal("the proxy kept a connection with 100 MiB of unread body")
	}
}

func TestMalformedRequestHead(t *testing.T) {
	f := newFixture(t, nil)
	for _, tt := range []struct{ name, raw string }{
		{"garbage", "GARBAGE\r\n\r\n"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
		{"space before colon", "GET http://api.example.com/ HTTP/1.1\r\nHost : api.example.com\r\n\r\n"},
		{"bare CR in a value", "GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\nX: a\rb\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, f)
			rc.send(tt.raw)
			resp, body := rc.response("GET")
			if resp.StatusCode != 400 || !strings.Contains(body, `"error"`) {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			if !rc.closed() {
				t.Fatal("connection left open after a malformed request")
			}
		})
	}
	if !strings.Contains(f.audit.String(), `"code":"bad_request"`) {
		t.Fatalf("malformed requests left no audit line:\n%s", f.audit.String())
	}
}

func TestResponseFraming(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-framing")
	rc := dialRaw(t, f)
	rc.send(f.head("GET", "/stream", h))
	resp, body := rc.response("GET")
	if body != "chunk 0;chunk 1;chunk 2;" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("streamed body %q TE=%v", body, resp.TransferEncoding)
	}
	rc.send(f.head("HEAD", "/x", h))
	resp, body = rc.response("HEAD")
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 2 {
		t.Fatalf("HEAD: %d %q CL=%d", resp.StatusCode, body, resp.ContentLength)
	}
	rc.send(f.head("GET", "/x", h))
	if resp, body := rc.response("GET"); resp.StatusCode != 200 || body != "ok" || resp.ContentLength != 2 {
		t.Fatalf("GET after HEAD: %d %q CL=%d", resp.StatusCode, body, resp.ContentLength)
	}
	if resp.Header.Get("Date") == "" {
		t.Fatal("no Date header")
	}
}

// On shutdown idle connections close at once and a request in flight
// finishes, told to close.
func TestGracefulShutdown(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-shutdown")
	idle := dialRaw(t, f)
	idle.send(f.head("GET", "/x", h))
	if resp, _ := idle.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d", resp.StatusCode)
	}
	busy := dialRaw(t, f)
	busy.send(f.head("GET", "/slow", h))
	for deadline := time.Now().Add(5 * time.Second); f.up.count() < 2 || f.up.last(t).Path != "/slow"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the upstream")
		}
	}
	f.cancel()
	if !idle.closed() {
		t.Fatal("an idle connection stayed open after shutdown began")
	}
	// Asserted on the listener itself: a dial to its old port can reach
	// whatever else bound that port since.
	select {
	case <-f.lnClosed:
	case <-time.After(5 * time.Second):
		t.Fatal("the listener is still open after shutdown began")
	}
	close(f.up.hold)
	resp, body := busy.response("GET")
	if resp.StatusCode != 200 || body != "slow" || !resp.Close {
		t.Fatalf("in-flight request: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	select {
	case err := <-f.serveErr:
		f.serveErr <- err // for the fixture's cleanup
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the last request")
	}
}

// FuzzFrontEnd sends arbitrary bytes to the proxy as a client would
// (HANDLE and PORT in the input stand for a valid handle and the
// upstream's port). Whatever arrives, the proxy answers with HTTP or
// closes, never hands the secret to the client, and the upstream only
// ever sees requests that carry the injected credential for the declared
// host.
func FuzzFrontEnd(f *testing.F) {
	fx := newFixture(f, nil)
	close(fx.up.hold) // /slow answers at once
	iss, err := fx.b.Issue(context.Background(), broker.IssueRequest{PluginID: "plugin-1", InvocationID: "inv-fuzz", Intent: "api.write",
		Destinations: []broker.Destination{{Host: "api.example.com", Port: fx.up.port}}, Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	port := strconv.Itoa(fx.up.port)
	get := "GET http://api.example.com:PORT/echo HTTP/1.1\r\nHost: api.example.com:PORT\r\nProxy-Authorization: Bearer HANDLE\r\n\r\n"
	for _, s := range []string{
		get,
		get + get,
		strings.Replace(get, "HTTP/1.1", "HTTP/1.0", 1),
		"POST http://api.example.com:PORT/echo HTTP/1.1\r\nHost: api.example.com:PORT\r\nProxy-Authorization: Bearer HANDLE\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST http://api.example.com:PORT/echo HTTP/1.1\r\nHost: api.example.com:PORT\r\nProxy-Authorization: Bearer HANDLE\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST http://api.example.com:PORT/echo HTTP/1.1\r\nHost: api.example.com:PORT\r\nProxy-Authorization: Bearer HANDLE\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n0123456789",
		"GET http://api.example.com:PORT/trailer HTTP/1.1\r\nHost: api.example.com:PORT\r\nProxy-Authorization: Basic SEFORExFOg==\r\n\r\n",
		"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
		"GET /echo HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET http://api.example.com:PORT/echo HTTP/1.1\r\nHost: evil.example.net\r\nProxy-Authorization: Bearer HANDLE\r\n\r\n",
		"GET http://api.example.com:PORT/%2e%2e/echo HTTP/1.1\r\nHost: api.example.com:PORT\r\nProxy-Authorization: Bearer HANDLE\r\nX: a\r\n b\r\n\r\n",
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		raw = strings.NewReplacer("HANDLE", iss.Handle, "PORT", port).Replace(raw)
		n := fx.up.count()
		c, err := net.Dial("tcp", fx.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, raw)
		_ = c.(*net.TCPConn).CloseWrite()
		out, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("reading the proxy's answer: %v", err)
		}
		if len(out) > 0 && !bytes.HasPrefix(out, []byte("HTTP/1.1 ")) {
			t.Fatalf("the proxy answered with something other than HTTP: %q", out[:min(len(out), 64)])
		}
		if bytes.Contains(out, []byte(testSecret)) {
			t.Fatalf("the secret reached the client: %q", out)
		}
		fx.up.mu.Lock()
		seen := slices.Clone(fx.up.seen[n:])
		fx.up.mu.Unlock()
		for _, r := range seen {
			if r.Header.Get("Authorization") != "Bearer "+testSecret || r.Host != "api.example.com:"+port {
				t.Fatalf("the upstream saw a request without the injected credential or for another host: %+v", r)
			}
		}
	})
}
