package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// rawRequest writes a request head byte for byte on c (a client or a
// TLS connection inside a tunnel) and reads the answer.
func rawRequest(t *testing.T, c net.Conn, head string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(HeaderError)
}

// The path and query go upstream exactly as the client sent them, in both
// proxy modes: "//", "..", escapes, '+' and ';' are data (an S3 key), and
// the proxy never answers 200 for a request it rewrote. Destinations are
// checked on the resolved path and on the path as sent, so dot segments
// cannot carry a request across a declared prefix in either reading.
func TestPathSentAsIs(t *testing.T) {
	f, caFile := newInterceptFixture(t)
	h := f.issue(t, "api.narrow", "inv-path")
	port := strconv.Itoa(f.up.port)
	for _, tc := range []struct {
		name, target string
		status       int
		code         string
	}{
		{"double slash", "/v1/a//w.txt", 200, ""},
		{"dot dot inside the prefix", "/v1/logs/../secret.txt", 200, ""},
		{"dot segment", "/v1/a/./b", 200, ""},
		{"escaped plus, plus, semicolon", "/v1/a%2Bb+c;d", 200, ""},
		{"unicode, escaped and raw percent-escaped slash", "/v1/%C3%A9t%C3%A9/x%2Fy", 200, ""},
		{"raw UTF-8", "/v1/été", 200, ""},
		{"query with reserved characters", "/v1/q?q=a;b&r=c+d&s=%2B&t=%20&u=&v", 200, ""},
		{"dot dot out of the prefix", "/v1/../admin", 403, CodeDestination},
		{"escaped dot dot out of the prefix", "/v1/%2e%2e/admin", 403, CodeDestination},
		{"dot dot into the prefix", "/x/../v1/k", 400, CodePathNotAllowed},
		{"empty segments into the prefix", "//v1/k", 400, CodePathNotAllowed},
	} {
		modes := map[string]func(t *testing.T) net.Conn{
			"absolute-form": func(t *testing.T) net.Conn {
				c, err := net.Dial("tcp", f.addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			},
			"CONNECT": func(t *testing.T) net.Conn {
				c, status, _ := rawConnect(t, f.addr, "api.example.com:"+port, h)
				if status != 200 {
					t.Fatalf("CONNECT: %d", status)
				}
				tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: poolOf(t, caFile)})
				t.Cleanup(func() { tc.Close() })
				return tc
			},
		}
		for mode, open := range modes {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				before := f.up.count()
				target := tc.target
				if mode == "absolute-form" {
					target = "http://api.example.com:" + port + tc.target
				}
				head := "GET " + target + " HTTP/1.1\r\nHost: api.example.com:" + port + "\r\n" +
					"Proxy-Authorization: Bearer " + h + "\r\n\r\n"
				checkPathSent(t, f, open(t), head, before, tc.target, tc.status, tc.code)
			})
		}
	}
}

// checkPathSent sends head on c and checks the answer: status and code,
// and then either nothing sent upstream since before requests (a
// refusal) or the path sent exactly as target.
func checkPathSent(t *testing.T, f *fixture, c net.Conn, head string, before int, target string, status int, code string) {
	t.Helper()
	gotStatus, gotCode := rawRequest(t, c, head)
	if gotStatus != status || gotCode != code {
		t.Fatalf("%d %q, want %d %q", gotStatus, gotCode, status, code)
	}
	if status != 200 {
		if f.up.count() != before {
			t.Fatal("a refused request reached the upstream")
		}
		return
	}
	if got := f.up.last(t).Target; got != target {
		t.Fatalf("the upstream received %q, the client sent %q", got, target)
	}
}

// FuzzRawPath: the path rawPath cuts from a request target by hand is
// the one net/url parses from it (same bytes once unescaped), for the
// absolute and the origin form.
func FuzzRawPath(f *testing.F) {
	for _, s := range []string{"http://a.example/v1/x?q=1", "http://a.example", "http://a.example?q=/x", "/v1/a//b/../c?x=%2B",
		"/", "/a%2Fb;c+d", "http://[::1]:8080/p", "HTTP://A.EXAMPLE/Ü?", "/x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || u.Opaque != "" {
			return // the proxy refuses such a target before
		}
		got := rawPath(&http.Request{RequestURI: target, URL: u})
		dec, err := url.PathUnescape(got)
		if err != nil {
			t.Fatalf("rawPath(%q) = %q: %v", target, got, err)
		}
		want := u.Path
		if want == "" {
			want = "/"
		}
		if dec != want {
			t.Fatalf("rawPath(%q) = %q (%q unescaped), net/url reads the path %q", target, got, dec, want)
		}
	})
}

// FuzzCleanPathFast: a path cleanPath returns unchanged without walking
// its segments (its no-allocation shortcut) is one the walk leaves
// unchanged, and what the walk returns is clean.
func FuzzCleanPathFast(f *testing.F) {
	for _, s := range []string{"/", "/a/b/", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/.a/..b/", "/x/...", "//"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		p = "/" + p
		if !hasDotOrEmptySegment(p) {
			if got := resolveSegments(p); got != p {
				t.Fatalf("%q has no segment to resolve, yet resolveSegments gives %q", p, got)
			}
			return
		}
		if c := resolveSegments(p); hasDotOrEmptySegment(c) && resolveSegments(c) != c {
			t.Fatalf("resolveSegments(%q) = %q, which is not clean", p, c)
		}
	})
}

// TestUpstreamAuthority: the authority sent upstream is the normalized
// host and port whatever form the client used; the client's string is
// reused only when it is exactly that.
func TestUpstreamAuthority(t *testing.T) {
	for _, c := range []struct {
		host      string
		port      int
		sent, out string
	}{
		{"api.example.com", 443, "api.example.com", "api.example.com"},
		{"api.example.com", 443, "API.example.com:443", "api.example.com"},
		{"api.example.com", 8443, "api.example.com:8443", "api.example.com:8443"},
		{"api.example.com", 8443, "API.EXAMPLE.COM:8443", "api.example.com:8443"},
		{"api.example.com", 8443, "api.example.com:08443", "api.example.com:8443"},
		{"api.example.com", 8443, "api.example.com:+8443", "api.example.com:8443"},
		{"api.example.com", 8443, "api.example.com.:8443", "api.example.com:8443"},
		{"::1", 8443, "[::1]:8443", "[::1]:8443"},
		{"::1", 8443, "::1:8443", "[::1]:8443"},
	} {
		if got := upstreamAuthority(c.host, c.port, c.sent); got != c.out {
			t.Errorf("upstreamAuthority(%q, %d, %q) = %q, want %q", c.host, c.port, c.sent, got, c.out)
		}
	}
}
