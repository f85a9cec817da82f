package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// Differential fuzz targets: the proxy's own HTTP/1.1 server side (conn.go,
// respwriter.go) against net/http's server, fed the same bytes over an
// in-memory connection.

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
	out := testenv.ServeNetHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
func proxyRequest(raw string, limit int64) (*parsedRequest, RefuseCode, string) {
	cs := &Server{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, HeaderLimit: limit}
	c := newConn(cs, testenv.NewMemConn(raw), context.Background())
	_, _ = c.br.Peek(1) // as serve waits for a request: the fast path reads a whole head
	req, code, reason := c.readRequest()
	if req == nil {
		return nil, code, reason
	}
	return parsed(req, req.Host), RefuseNone, ""
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
