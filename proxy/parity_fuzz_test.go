package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Differential fuzz targets: the proxy's own HTTP/1.1 server side (conn.go,
// respwriter.go) against net/http's server, fed the same bytes over an
// in-memory connection.

// memConn is a connection whose reads come from a fixed input and whose
// writes are collected; Close reports on done.
type memConn struct {
	r    *bytes.Reader
	mu   sync.Mutex
	out  bytes.Buffer
	once sync.Once
	done chan struct{}
}

func newMemConn(in string) *memConn {
	return &memConn{r: bytes.NewReader([]byte(in)), done: make(chan struct{})}
}

func (c *memConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}
func (c *memConn) Close() error                     { c.once.Do(func() { close(c.done) }); return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8899} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// serveNetHTTP runs net/http's server with h on one connection that
// carries in, and returns what the server wrote.
func serveNetHTTP(h http.Handler, in string) []byte {
	c := newMemConn(in)
	l := &oneConnListener{c: c, closed: make(chan struct{})}
	srv := &http.Server{Handler: h, MaxHeaderBytes: 1 << 20, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() { _ = srv.Serve(l); close(served) }()
	<-c.done
	l.Close()
	_ = srv.Close()
	<-served
	return c.written()
}

// parsedRequest is what both servers agree a request head says.
type parsedRequest struct {
	Method, URL, Proto, Host string
	Header                   http.Header
	ContentLength            int64
	TransferEncoding         []string
	Close                    bool
	Body                     string
	BodyErr                  bool
}

func parsed(r *http.Request, host string) *parsedRequest {
	b, err := io.ReadAll(r.Body)
	h := r.Header.Clone()
	delete(h, "Host")
	return &parsedRequest{Method: r.Method, URL: r.URL.String(), Proto: r.Proto, Host: host, Header: h,
		ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding, Close: r.Close, Body: string(b), BodyErr: err != nil}
}

// netHTTPRequest is net/http's reading of the first request in raw: the
// request, or nil and the status it answered with (0 for none). For an
// absolute-form request the Host is the raw Host header as net/textproto
// reads it, when there is one (net/http replaces it with the target's).
func netHTTPRequest(raw string) (*parsedRequest, int) {
	var got *parsedRequest
	var once sync.Once
	out := serveNetHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			host := r.Host
			if h, ok := rawHost(raw); ok && r.URL.IsAbs() {
				host = h
			}
			got = parsed(r, host)
		})
	}), raw)
	if got != nil {
		return got, 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		return nil, 0
	}
	return nil, resp.StatusCode
}

func rawHost(raw string) (string, bool) {
	_, rest, _ := strings.Cut(raw, "\n")
	h, _ := textproto.NewReader(bufio.NewReader(strings.NewReader(rest))).ReadMIMEHeader()
	if v := h["Host"]; len(v) > 0 {
		return v[0], true
	}
	return "", false
}

// proxyRequest is the proxy's reading of the first request in raw.
func proxyRequest(raw string, limit int64) (*parsedRequest, refuseCode, string) {
	cs := &connServer{readHeaderTimeout: time.Minute, idleTimeout: time.Minute, headerLimit: limit}
	c := newClientConn(cs, newMemConn(raw), context.Background())
	_, _ = c.br.Peek(1) // as serve waits for a request: the fast path reads a whole head
	req, code, reason := c.readRequest()
	if req == nil {
		return nil, code, reason
	}
	return parsed(req, req.Host), refuseNone, ""
}

// FuzzRequestHead: the proxy reads a request head as net/http's server
// does — it refuses what net/http refuses and reads the same method, URL,
// Host, headers, framing and body from what both accept — except where
// it is stricter on purpose: Transfer-Encoding with Content-Length, and
// anything but HTTP/1.x.
func FuzzRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET http://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: api.example.com\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
		"GET http://api.example.com/x HTTP/1.1\r\nHost: \u00a0api.example.com\r\n\r\n",
		"GET http://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n \t b\r\n\r\n",
		"GET http://api.example.com/x HTTP/1.1\r\nHost:  api.example.com \t\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 64<<10 {
			return
		}
		ours, code, reason := proxyRequest(raw, 1<<20)
		ref, status := netHTTPRequest(raw)
		switch {
		case ours == nil && ref == nil:
			return
		case ours == nil && (reason == "both Transfer-Encoding and Content-Length" || reason == "not an HTTP/1.x request"):
			return // stricter on purpose
		case ours == nil && status == http.StatusExpectationFailed:
			t.Fatalf("the proxy refused (%v %s) what net/http read (417 comes later)", code, reason)
		case ours == nil:
			t.Fatalf("the proxy refused (%v: %s) what net/http accepted: %+v", code, reason, ref)
		case ref == nil && status == http.StatusExpectationFailed:
			return // the proxy answers 417 after reading the head too
		case ref == nil:
			t.Fatalf("the proxy accepted what net/http refused (%d): %+v", status, ours)
		}
		if ours.Host != ref.Host || ours.Method != ref.Method || ours.URL != ref.URL || ours.Proto != ref.Proto ||
			ours.ContentLength != ref.ContentLength || !slices.Equal(ours.TransferEncoding, ref.TransferEncoding) ||
			ours.Body != ref.Body || ours.BodyErr != ref.BodyErr {
			t.Fatalf("the proxy read\n%+v\nnet/http read\n%+v", ours, ref)
		}
		if !maps.EqualFunc(ours.Header, ref.Header, slices.Equal) {
			t.Fatalf("headers: the proxy read %q, net/http %q", ours.Header, ref.Header)
		}
	})
}

// proxyWrite is what the proxy's ResponseWriter sends for emit.
func proxyWrite(emit func(http.ResponseWriter), method string) []byte {
	mc := newMemConn("")
	cs := &connServer{log: slog.New(slog.DiscardHandler)}
	c := newClientConn(cs, mc, context.Background())
	req := &http.Request{Method: method, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}}
	c.w.reset(req)
	emit(&c.w)
	c.w.finish()
	return mc.written()
}

// clientView is what a client reads from a response.
type clientView struct {
	Status  int
	Header  http.Header
	Body    string
	Trailer http.Header
}

func readAsClient(t *testing.T, out []byte, method string) clientView {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("a client cannot read the response: %v\n%q", err, out)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("a client cannot read the body: %v\n%q", err, out)
	}
	h := resp.Header.Clone()
	// Framing, date and sniffing are each server's own.
	for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding", "Connection", "Content-Type", "Trailer"} {
		delete(h, k)
	}
	return clientView{Status: resp.StatusCode, Header: h, Body: string(b), Trailer: resp.Trailer}
}

// FuzzResponseWrite: an upstream response, read as the proxy's upstream
// client reads it and forwarded by relay, reaches the
// client as net/http's server would send it: same status, headers, body
// and trailers; no header net/http would drop (an invalid name such as
// "Transfer-Encoding " beside a Content-Length).
func FuzzResponseWrite(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding : chunked\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5\r\nhello\r\n0\r\nX-T: v\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno",
		"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
		"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-Sp: a  b \r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.0 200 OK\r\n\r\nclose-delimited",
	} {
		f.Add(s, false)
	}
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true)
	f.Fuzz(func(t *testing.T, raw string, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), &http.Request{Method: method})
		if err != nil || resp.StatusCode < 200 || resp.StatusCode > 999 || resp.StatusCode == http.StatusSwitchingProtocols {
			return
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || len(body) > 1<<20 {
			return
		}
		stripHopByHop(resp.Header)
		// relay, the proxy's own, on a fresh copy each time.
		emit := func(w http.ResponseWriter) {
			relay(w, &http.Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Trailer: resp.Trailer.Clone(),
				Body: io.NopCloser(bytes.NewReader(body))})
		}
		ours := readAsClient(t, proxyWrite(emit, method), method)
		ref := readAsClient(t, serveNetHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { emit(w) }),
			method+" / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), method)
		if ours.Status != ref.Status || ours.Body != ref.Body {
			t.Fatalf("the proxy sent %d %q, net/http %d %q", ours.Status, ours.Body, ref.Status, ref.Body)
		}
		if !maps.EqualFunc(ours.Header, ref.Header, slices.Equal) {
			t.Fatalf("headers: the proxy sent %q, net/http %q", ours.Header, ref.Header)
		}
		if !maps.EqualFunc(ours.Trailer, ref.Trailer, slices.Equal) {
			t.Fatalf("trailers: the proxy sent %q, net/http %q", ours.Trailer, ref.Trailer)
		}
	})
}
