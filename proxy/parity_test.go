package proxy

import (
	"net/http"
	"strings"
	"testing"
)

// Where the proxy parses or writes HTTP by hand it does what net/http
// does: these are the cases found where it did not.

// A Host value is trimmed of spaces and tabs only, as net/textproto
// does: a no-break space stays, and the Host is malformed (net/http's
// server answers 400 too).
func TestHostUnicodeSpaceRefused(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-nbsp")
	host := strings.TrimPrefix(f.url(""), "http://")
	for _, v := range []string{"\u00a0" + host, host + "\u0085", host + "\u00a0"} {
		rc := dialRaw(t, f)
		rc.send("GET " + f.url("/x") + " HTTP/1.1\r\nHost: " + v + "\r\nProxy-Authorization: Bearer " + h + "\r\n\r\n")
		resp, body := rc.response("GET")
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderError) != CodeBadRequest {
			t.Errorf("Host %q: %d %s", v, resp.StatusCode, body)
		}
	}
	if f.up.count() != 0 {
		t.Fatal("a request with a malformed Host reached the upstream")
	}
}

// An upstream header name net/http would not write (a space before the
// colon) never reaches the client, so "Transfer-Encoding : chunked" cannot
// sit beside the Content-Length the proxy frames the body with.
func TestUpstreamInvalidHeaderNameDropped(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-bad-name")
	rc := dialRaw(t, f)
	rc.send(f.head("GET", "/bad-header-name", h))
	var head strings.Builder
	for {
		line, err := rc.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the head: %v (so far %q)", err, head.String())
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
	}
	if strings.Contains(strings.ToLower(head.String()), "transfer-encoding") {
		t.Fatalf("the client got a Transfer-Encoding line:\n%s", head.String())
	}
	if !strings.Contains(head.String(), "Content-Length: 5\r\n") {
		t.Fatalf("no Content-Length:\n%s", head.String())
	}
}

// A chunked request body with a malformed chunk size is the client's
// fault: 400 bad_request, not a 502 blamed on the upstream.
func TestMalformedChunkIsBadRequest(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-bad-chunk")
	for _, tt := range []struct{ name, method, extra, body string }{
		{"streamed POST", "POST", "Transfer-Encoding: chunked\r\n", "zz\r\nabc\r\n0\r\n\r\n"},
		{"PUT, negative chunk size", "PUT", "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n-1\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, f)
			rc.send(f.head(tt.method, "/echo", h, tt.extra) + tt.body)
			resp, body := rc.response(tt.method)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(HeaderError) != CodeBadRequest {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
}

// The request head limit is max_header_bytes exactly: request line,
// headers and the blank line that ends them. A head of that many bytes
// is served; one byte more is 431, also when a pipelined request before
// it left bytes in the read buffer.
func TestHeaderLimitIsExact(t *testing.T) {
	const limit = 8 << 10
	f := newFixture(t, func(c *Config) { c.Limits.MaxHeaderBytes = limit })
	h := f.issue(t, "api.write", "inv-limit")
	sized := func(n int) string {
		base := f.head("GET", "/x", h, "X-Pad: \r\n")
		return f.head("GET", "/x", h, "X-Pad: "+strings.Repeat("a", n-len(base))+"\r\n")
	}
	for _, tt := range []struct {
		name   string
		size   int
		before string
		want   int
	}{
		{"at the limit", limit, "", http.StatusOK},
		{"one byte over", limit + 1, "", http.StatusRequestHeaderFieldsTooLarge},
		{"over, after a pipelined request", limit + 1, f.head("GET", "/x", h), http.StatusRequestHeaderFieldsTooLarge},
		{"at the limit, after a pipelined request", limit, f.head("GET", "/x", h), http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			head := sized(tt.size)
			if len(head) != tt.size {
				t.Fatalf("built a head of %d bytes", len(head))
			}
			rc := dialRaw(t, f)
			rc.send(tt.before + head)
			if tt.before != "" {
				if resp, _ := rc.response("GET"); resp.StatusCode != http.StatusOK {
					t.Fatalf("first request: %d", resp.StatusCode)
				}
			}
			if resp, body := rc.response("GET"); resp.StatusCode != tt.want {
				t.Fatalf("%d bytes: %d %s", tt.size, resp.StatusCode, body)
			}
		})
	}
}
