package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Answer is what a raw HTTP/2 request got: the response's status and
// headers, or a reset of its stream (or of the connection).
type h2Answer struct {
	status int
	header http.Header
	reset  bool
}

// rawH2Request sends one request with exactly fields (pseudo-headers
// included, whatever they hold: no client library would send them) on
// conn, a TLS connection that negotiated h2, and reads the answer's head.
func rawH2Request(t *testing.T, conn net.Conn, fields [][2]string) h2Answer {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // against a hang, not a timed assertion
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return h2Answer{reset: true}
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			a := h2Answer{header: http.Header{}}
			for _, hf := range f.Fields {
				if hf.Name == ":status" {
					a.status, _ = strconv.Atoi(hf.Value)
				} else {
					a.header.Add(hf.Name, hf.Value)
				}
			}
			return a
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return h2Answer{reset: true}
		}
	}
}

// h2Fields are the fields of a request: pseudo-headers, and a host
// header when host is not "".
func h2Fields(method, path, authority, host string) [][2]string {
	f := [][2]string{{":method", method}, {":scheme", "https"}, {":path", path}}
	if authority != "" {
		f = append(f, [2]string{":authority", authority})
	}
	if host != "" {
		f = append(f, [2]string{"host", host})
	}
	return f
}

// acceptingHandler answers 200 to whatever its server takes: a
// reference server refuses with a 4xx of its own or a reset.
func acceptingHandler() http.Handler {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
}

// h2Accepts: net/http's HTTP/2 server takes the request.
func h2Accepts(t *testing.T, addr string, fields [][2]string) bool {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	a := rawH2Request(t, conn, fields)
	return !a.reset && a.status == http.StatusOK
}

// h1Accepts: net/http's HTTP/1.1 server takes the request line and Host
// the pseudo-headers stand for.
func h1Accepts(t *testing.T, addr, method, path, authority string) bool {
	t.Helper()
	if strings.ContainsAny(method+path+authority, "\r\n") {
		return false // a line break would make another request head
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, method+" "+path+" HTTP/1.1\r\nHost: "+authority+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// originForm reports whether target is a request target Airlock takes
// inside a tunnel: not absolute-form (the tunnel names the host).
func originForm(target string) bool {
	u, err := url.ParseRequestURI(target)
	return err == nil && !u.IsAbs() && u.Host == ""
}

// HTTP/2 requests are held to HTTP/1.1's rules: for a table of
// pseudo-header values, Airlock takes a request exactly when net/http's
// HTTP/2 server takes it, net/http's HTTP/1.1 server takes the request
// line and Host it stands for, it is origin-form for the tunnel's host
// (Airlock's own rule inside a tunnel), and a host header beside it
// names the same authority. Every refusal net/http's HTTP/2 server
// would not make is a 400 with a specific code, never a 502, and what
// is taken reaches the upstream with the request line it came with.
func TestH2PseudoHeadersDifferential(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	handle := f.issue(t, "api.write", "inv-h2-pseudo")
	target := "api.example.com:" + strconv.Itoa(f.up.port)

	ref2 := httptest.NewUnstartedServer(acceptingHandler())
	ref2.EnableHTTP2 = true
	ref2.StartTLS()
	defer ref2.Close()
	ref1 := httptest.NewServer(acceptingHandler())
	defer ref1.Close()

	cases := []struct {
		name                    string
		method, path, authority string
		host                    string // a host header beside :authority; "" none
		hostAgrees              bool   // the host header names :authority's host and port
	}{
		{"plain", "GET", "/ok", target, "", true},
		{"query", "GET", "/ok?x=1&y=%20", target, "", true},
		{"escaped space", "GET", "/ok%20x", target, "", true},
		{"fragment", "GET", "/ok#frag", target, "", true},
		{"non-ASCII path", "GET", "/\u00e9t\u00e9", target, "", true},
		{"double slash", "GET", "//ok", target, "", true},
		{"lower-case method", "get", "/ok", target, "", true},
		{"extension method", "PROPFIND", "/ok", target, "", true},
		{"space in path", "GET", "/v1/x /admin/secret", target, "", true},
		{"space and version in path", "GET", "/ok HTTP/1.1", target, "", true},
		{"trailing space in path", "GET", "/ok ", target, "", true},
		{"tab in path", "GET", "/ok\tx", target, "", true},
		{"DEL in path", "GET", "/ok\x7f", target, "", true},
		{"relative path", "GET", "ok", target, "", true},
		{"absolute path", "GET", "https://" + target + "/ok", target, "", true},
		{"asterisk", "GET", "*", target, "", true},
		{"empty path", "GET", "", target, "", true},
		{"space in method", "GE T", "/ok", target, "", true},
		{"separator in method", "G(T", "/ok", target, "", true},
		{"non-ASCII method", "G\u00c9T", "/ok", target, "", true},
		{"empty method", "", "/ok", target, "", true},
		{"upper-case authority", "GET", "/ok", strings.ToUpper(target), "", true},
		{"space in authority", "GET", "/ok", target + " ", "", true},
		{"tab in authority", "GET", "/ok", target + "\t", "", true},
		{"space inside authority", "GET", "/ok", "api.exa mple.com:" + strconv.Itoa(f.up.port), "", true},
		{"userinfo in authority", "GET", "/ok", "u@" + target, "", true},
		{"slash in authority", "GET", "/ok", target + "/x", "", true},
		{"no authority, host header", "GET", "/ok", "", target, true},
		{"host header agrees", "GET", "/ok", target, target, true},
		{"host header agrees, other case", "GET", "/ok", target, strings.ToUpper(target), true},
		{"host header names another host", "GET", "/ok", target, "evil.example.com:" + strconv.Itoa(f.up.port), false},
		{"host header names another port", "GET", "/ok", target, "api.example.com:1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fields := h2Fields(tc.method, tc.path, tc.authority, tc.host)
			authority := tc.authority
			if authority == "" {
				authority = tc.host // net/http's HTTP/2 server takes the host header then
			}
			ref := h2Accepts(t, ref2.Listener.Addr().String(), fields)
			want := ref && h1Accepts(t, ref1.Listener.Addr().String(), tc.method, tc.path, authority) &&
				originForm(tc.path) && strings.EqualFold(authority, target) && tc.hostAgrees

			conn, status, code := rawConnect(t, f.addr, target, handle)
			if status != http.StatusOK {
				t.Fatalf("CONNECT: %d %q", status, code)
			}
			tc2 := tls.Client(conn, &tls.Config{ServerName: "api.example.com", RootCAs: interceptPool(t, caFile), NextProtos: []string{"h2"}})
			if err := tc2.Handshake(); err != nil || tc2.ConnectionState().NegotiatedProtocol != "h2" {
				t.Fatalf("TLS inside the tunnel: %v (ALPN %q)", err, tc2.ConnectionState().NegotiatedProtocol)
			}
			before := f.up.count()
			a := rawH2Request(t, tc2, fields)
			got := !a.reset && a.status == http.StatusOK && a.header.Get(HeaderError) == ""
			if got != want {
				t.Fatalf("Airlock took it: %v (status %d, code %q, reset %v); want %v (net/http's HTTP/2 server took it: %v)",
					got, a.status, a.header.Get(HeaderError), a.reset, want, ref)
			}
			switch {
			case got:
				// The upstream speaks HTTP/2 too: :path goes as sent.
				if seen := f.up.last(t); seen.Target != tc.path || seen.Method != tc.method {
					t.Fatalf("the upstream received %q %q, not the request line the client sent", seen.Method, seen.Target)
				}
			case ref:
				// net/http's HTTP/2 server would have taken it: the
				// refusal is Airlock's own, a specific 400.
				if code := a.header.Get(HeaderError); a.status != http.StatusBadRequest ||
					code != CodeInvalidPseudoHeader && code != CodeHostMismatch && code != CodeBadRequest {
					t.Fatalf("refused with %d %q, want 400 with a specific code", a.status, code)
				}
				if f.up.count() != before {
					t.Fatal("a refused request reached the upstream")
				}
			}
		})
	}
}

// checkRequestLine is held to http.ReadRequest, the parser of net/http's
// HTTP/1.1 server: it takes a method, target and authority exactly when
// ReadRequest reads the request line and Host they make back unchanged
// and the server would find the Host valid. (CONNECT, whose target is
// an authority, is left out: a tunnel refuses it.)
func FuzzH2RequestLine(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/v1/x", "api.example.com"},
		{"GET", "/v1/x /admin/secret", "api.example.com"},
		{"get", "/a?b=c#d", "api.example.com:8443"},
		{"G(T", "/", "h"},
		{"GET", "*", "[::1]:443"},
		{"GET", "http://a/b", "a"},
		{"GET", "/\u00e9", "h\u00e9"},
		{"GET", "/x", "a b"},
		{"GET", "/x\x7f", "a"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, target, authority string) {
		if method == http.MethodConnect || strings.ContainsAny(method+target+authority, "\r\n") {
			return
		}
		airlock := checkRequestLine(method, target, authority) == nil
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: x\r\n\r\n")))
		line := err == nil && req.Method == method && req.RequestURI == target
		// The Host on its own, since ReadRequest takes an absolute
		// target's authority over it.
		hreq, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: " + authority + "\r\n\r\n")))
		host := err == nil && hreq.Host == authority && authority != "" && httpguts.ValidHostHeader(authority)
		if airlock != (line && host) {
			t.Fatalf("checkRequestLine(%q, %q, %q) takes it: %v; net/http reads the request line back: %v, the Host: %v",
				method, target, authority, airlock, line, host)
		}
	})
}
