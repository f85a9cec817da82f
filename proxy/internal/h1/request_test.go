package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzWriteRequest: the request the proxy re-originates upstream
// (WriteRequest) is written with Airlock's writer, read back with
// http.ReadRequest, and compared with what went in and with what
// (*http.Request).Write sends for the same request: the method, the
// request target and Host as given; each header's values in order and
// byte for byte as net/http's writer sends them; the body as it was,
// framed by its Content-Length when known, else chunked; and nothing
// after the one request, so no input can smuggle a second one.
//
// header holds "Name: value" lines (LF-separated); mode 0 sends the body
// with its length, 1 with an unknown length, 2 sends none.
func FuzzWriteRequest(f *testing.F) {
	for _, s := range []struct {
		method, target, host, header, body string
		mode                               uint8
	}{
		{"GET", "/p?q=1", "api.example.com", "X-A: 1\nX-A: 2\nAccept: */*", "", 2},
		{"POST", "/v1/items", "api.example.com:8443", "Content-Type: application/json", `{"a":1}`, 0},
		{"POST", "/upload", "a.example", "X-B: a\r\nEvil: 1", "hello", 1},
		{"PUT", "/x", "a.example", "Connection: close\nTransfer-Encoding: gzip\nContent-Length: 99", "", 2},
		{"PATCH", "/%2F?x=%20", "[::1]:80", "User-Agent: botocore/1.0\nX-Z: \x00", "body", 0},
		{"OPTIONS", "*", "a.example", "Trailer: X-T\nHost: evil.example", "", 1},
		{"DELETE", "/a%20b/./c", "a.example", "X-Sp:  padded  ", "", 2},
	} {
		f.Add(s.method, s.target, s.host, s.header, s.body, s.mode)
	}
	f.Fuzz(func(t *testing.T, method, target, host, header, body string, mode uint8) {
		// What reaches WriteRequest: a method token the client sent,
		// a target and Host parseTarget accepted, header names checked
		// where the request was read.
		if !httpguts.ValidHeaderFieldName(method) || method == http.MethodConnect || !httpguts.ValidHostHeader(host) ||
			strings.ContainsAny(host, " /") || host == "" {
			return
		}
		tu, err := url.ParseRequestURI(target)
		if err != nil || tu.Host != "" || tu.Scheme != "" || tu.Opaque != "" && target != "*" {
			return
		}
		u := &url.URL{Scheme: "https", Host: host, Path: tu.Path, RawPath: tu.RawPath, RawQuery: tu.RawQuery,
			ForceQuery: tu.ForceQuery, Opaque: tu.Opaque}
		hdr := http.Header{}
		for line := range strings.SplitSeq(header, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || !httpguts.ValidHeaderFieldName(k) ||
				!httpguts.ValidHeaderFieldValue(strings.Map(newlineToSpace, v)) {
				continue
			}
			hdr.Add(k, v)
		}
		mk := func() *http.Request {
			r := &http.Request{Method: method, URL: u, Host: host, Header: hdr.Clone(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
			switch mode % 3 {
			case 0:
				r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
				if body == "" {
					r.Body = nil
				}
			case 1:
				r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), -1
			}
			return r
		}

		var ours bytes.Buffer
		bw := bufio.NewWriter(&ours)
		if err := WriteRequest(bw, mk()); err != nil {
			if errors.Is(err, ErrInvalidTarget) && strings.ContainsFunc(RequestTarget(u), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				return // refused, not written
			}
			t.Fatalf("WriteRequest: %v", err)
		}
		_ = bw.Flush()
		br := bufio.NewReader(bytes.NewReader(ours.Bytes()))
		got, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("what WriteRequest wrote does not parse: %v\n%q", err, ours.Bytes())
		}
		gotBody, err := io.ReadAll(got.Body)
		if err != nil {
			t.Fatalf("body of what WriteRequest wrote: %v\n%q", err, ours.Bytes())
		}
		if br.Buffered() > 0 {
			t.Fatalf("bytes after the one request: %q", ours.Bytes())
		}

		// What went in: method, target, Host, body and framing.
		if got.Method != method || got.RequestURI != RequestTarget(u) || got.Host != host {
			t.Fatalf("read back as %q %q Host %q, want %q %q Host %q", got.Method, got.RequestURI, got.Host,
				method, RequestTarget(u), host)
		}
		sent := body
		if mode%3 == 2 {
			sent = ""
		}
		if string(gotBody) != sent {
			t.Fatalf("body read back %q, want %q", gotBody, sent)
		}
		switch {
		case mode%3 == 1 && !slices.Equal(got.TransferEncoding, []string{"chunked"}):
			t.Fatalf("a body of unknown length went as %q, want chunked", got.TransferEncoding)
		case mode%3 != 1 && (len(got.TransferEncoding) > 0 || got.ContentLength != int64(len(sent))):
			t.Fatalf("framing %q length %d, want Content-Length %d", got.TransferEncoding, got.ContentLength, len(sent))
		}
		for _, k := range []string{"Connection", "Trailer"} {
			if _, ok := got.Header[k]; ok {
				t.Fatalf("the client's %s header went upstream", k)
			}
		}

		// What net/http's writer sends: the same header values, byte for
		// byte, in the same order. It adds a User-Agent when none was
		// given and passes Connection on; WriteRequest does neither, and
		// both frame the body themselves.
		var ref bytes.Buffer
		if err := mk().Write(&ref); err != nil {
			return // net/http refuses what it cannot write; WriteRequest's input never is
		}
		want, err := http.ReadRequest(bufio.NewReader(&ref))
		if err != nil {
			return
		}
		if u.Opaque == "" && want.RequestURI != got.RequestURI {
			t.Fatalf("target %q, net/http sends %q", got.RequestURI, want.RequestURI)
		}
		// net/http sends only the first User-Agent, and none at all
		// when it is empty; WriteRequest sends every one the client sent.
		want.Header.Del("User-Agent")
		for _, v := range hdr["User-Agent"] {
			want.Header.Add("User-Agent", textproto.TrimString(strings.Map(newlineToSpace, v)))
		}
		for _, h := range []http.Header{got.Header, want.Header} {
			for _, k := range []string{"Connection", "Content-Length", "Transfer-Encoding", "Trailer"} {
				h.Del(k)
			}
		}
		if len(got.Header) != len(want.Header) {
			t.Fatalf("headers %q, net/http sends %q", got.Header, want.Header)
		}
		for k, vv := range want.Header {
			if !slices.Equal(got.Header[k], vv) {
				t.Fatalf("header %q: %q, net/http sends %q", k, got.Header[k], vv)
			}
		}
	})
}

// newlineToSpace is what both writers do to a value's CR, LF and NUL
// (appendHeaderValue; net/http's for CR and LF).
func newlineToSpace(r rune) rune {
	if r == '\r' || r == '\n' || r == 0 {
		return ' '
	}
	return r
}

// WriteRequest frames bodies itself and sends only what the upstream
// should see.
func TestWriteRequest(t *testing.T) {
	for _, tt := range []struct {
		name    string
		method  string
		body    io.Reader
		length  int64
		header  http.Header
		want    []string // lines the head must hold
		notWant []string // no line may start with these
		rest    string   // what follows the head
		err     bool
	}{
		{name: "GET", method: "GET", header: http.Header{"Connection": {"close"}, "X-A": {"1"}},
			want: []string{"GET /p?q=1 HTTP/1.1", "Host: api.example.com", "X-A: 1"}, notWant: []string{"Connection", "User-Agent", "Content-Length"}},
		{name: "POST without body", method: "POST", want: []string{"Content-Length: 0"}},
		{name: "known length", method: "PUT", body: strings.NewReader("hello"), length: 5,
			want: []string{"Content-Length: 5"}, notWant: []string{"Transfer-Encoding"}, rest: "hello"},
		{name: "unknown length", method: "POST", body: strings.NewReader("hello"), length: -1,
			want: []string{"Transfer-Encoding: chunked"}, notWant: []string{"Content-Length"}, rest: "5\r\nhello\r\n0\r\n\r\n"},
		{name: "short body", method: "PUT", body: strings.NewReader("hel"), length: 5, err: true},
		{name: "newline in a value", method: "GET", header: http.Header{"X-B": {"a\r\nEvil: 1"}},
			want: []string{"X-B: a  Evil: 1"}, notWant: []string{"Evil"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, _ := url.Parse("https://api.example.com/p?q=1")
			req := &http.Request{Method: tt.method, URL: u, Host: u.Host, Header: tt.header, ContentLength: tt.length}
			if req.Header == nil {
				req.Header = http.Header{}
			}
			if tt.body != nil {
				req.Body = io.NopCloser(tt.body)
			}
			var buf bytes.Buffer
			bw := bufio.NewWriter(&buf)
			err := WriteRequest(bw, req)
			_ = bw.Flush()
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if tt.err {
				return
			}
			head, rest, ok := strings.Cut(buf.String(), "\r\n\r\n")
			if !ok {
				t.Fatalf("no end of head in %q", buf.String())
			}
			lines := strings.Split(head, "\r\n")
			for _, w := range tt.want {
				if !slices.Contains(lines, w) {
					t.Errorf("head lacks %q:\n%s", w, head)
				}
			}
			for _, nw := range tt.notWant {
				for _, l := range lines {
					if strings.HasPrefix(l, nw) {
						t.Errorf("head has a line starting %q:\n%s", nw, head)
					}
				}
			}
			if rest != tt.rest {
				t.Errorf("after the head %q, want %q", rest, tt.rest)
			}
			// What was written parses as the request it was.
			back, err := http.ReadRequest(bufio.NewReader(strings.NewReader(buf.String())))
			if err != nil {
				t.Fatalf("written request does not parse: %v", err)
			}
			if back.Method != tt.method || back.URL.RequestURI() != "/p?q=1" || back.Host != "api.example.com" {
				t.Fatalf("parsed back as %s %s host %s", back.Method, back.URL, back.Host)
			}
		})
	}
}
