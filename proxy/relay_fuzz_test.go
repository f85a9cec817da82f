package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/proxy/internal/h1"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// A differential fuzz target for the response path: an upstream's
// response relayed (forward.go) through the HTTP/1.1 loop (package h1)
// against the same handler run by net/http's server, fed the same bytes
// over an in-memory connection. The loop's own request and response
// targets are h1's.

// proxyWrite is what the proxy's HTTP/1.1 loop sends for emit, run as
// the handler of the request in.
func proxyWrite(emit func(http.ResponseWriter), in string) []byte {
	mc := testenv.NewMemConn(in)
	l := testenv.NewMemListener(mc)
	loop := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { emit(w) }),
		Log: slog.New(slog.DiscardHandler), ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, HeaderLimit: 1 << 20,
		Refuse: func(context.Context, h1.Refusal) *http.Response { panic("the loop refused the request") }}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = loop.Serve(ctx, l); close(served) }()
	<-mc.Done()
	cancel()
	<-served
	return mc.Written()
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
		in := method + " / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
		ours := readAsClient(t, proxyWrite(emit, in), method)
		ref := readAsClient(t, testenv.ServeNetHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { emit(w) }), in), method)
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
