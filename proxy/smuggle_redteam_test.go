package proxy

import (
	"net/http"
	"slices"
	"testing"
)

// Content-Length spellings and header-line games on a pipelined
// connection, end to end through the fast request path and its
// fallback: each request is framed as net/http frames it, and the bytes
// after a body are read as the next request, never as body; a spelling
// net/http refuses is refused before anything goes upstream, and the
// connection closes.
func TestPipelinedFramingGames(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-framing")
	for _, tc := range []struct {
		name  string
		extra string // header lines of the first request
		body  string // sent after its head
		want  int    // its status; 200: the body went upstream whole
		sent  string // the body the upstream must see
	}{
		{"plain", "Content-Length: 5\r\n", "hello", 200, "hello"},
		{"lower case name", "content-length: 5\r\n", "hello", 200, "hello"},
		{"mixed case name", "cOnTeNt-LeNgTh: 5\r\n", "hello", 200, "hello"},
		{"leading zeros", "Content-Length: 0005\r\n", "hello", 200, "hello"},
		{"spaces and tabs around", "Content-Length: \t5 \t\r\n", "hello", 200, "hello"},
		{"same length twice", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello", 200, "hello"},
		{"plus sign", "Content-Length: +5\r\n", "hello", 400, ""},
		{"minus sign", "Content-Length: -5\r\n", "hello", 400, ""},
		{"hex", "Content-Length: 0x5\r\n", "hello", 400, ""},
		{"comma list", "Content-Length: 5, 5\r\n", "hello", 400, ""},
		{"empty", "Content-Length: \r\n", "hello", 400, ""},
		{"19 digits, past int64", "Content-Length: 9999999999999999999\r\n", "hello", 400, ""},
		{"two lengths", "Content-Length: 5\r\nContent-Length: 6\r\n", "hello", 400, ""},
		{"space before the colon", "Content-Length : 5\r\n", "hello", 400, ""},
		{"folded length (obs-fold, read as net/http reads it)", "Content-Length:\r\n 5\r\n", "hello", 200, "hello"},
		{"bare LF header line", "X-A: 1\nContent-Length: 5\r\n", "hello", 200, "hello"},
		{"bare CR in a value", "X-A: 1\rContent-Length: 9\r\nContent-Length: 5\r\n", "hello", 400, ""},
		{"NUL in a value", "X-A: 1\x00\r\nContent-Length: 5\r\n", "hello", 400, ""},
		{"a second Host", "Host: other.example.com\r\n", "hello", 400, ""},
		{"header name with DEL", "X\x7fA: 1\r\nContent-Length: 5\r\n", "hello", 400, ""},
		{"header name with a space", "X A: 1\r\nContent-Length: 5\r\n", "hello", 400, ""},
		{"header name with a non-ASCII byte", "X\xc3\xa9: 1\r\nContent-Length: 5\r\n", "hello", 400, ""},
		{"TE spelled in lower case with a length", "transfer-encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := f.up.count()
			rc := dialRaw(t, f)
			rc.send(f.head("POST", "/first", h, tc.extra) + tc.body + f.head("GET", "/second", h))
			resp, _ := rc.response("POST")
			if resp.StatusCode != tc.want {
				t.Fatalf("first: status %d %q, want %d", resp.StatusCode, resp.Header.Get(HeaderError), tc.want)
			}
			if tc.want != 200 {
				if !rc.closed() {
					t.Fatal("the connection stayed open after a refused head")
				}
				if f.up.count() != n {
					t.Fatal("a refused request reached the upstream")
				}
				return
			}
			resp, _ = rc.response("GET")
			if resp.StatusCode != 200 {
				t.Fatalf("second: status %d", resp.StatusCode)
			}
			got := f.up.since(n)
			if len(got) != 2 || got[0].Path != "/first" || got[0].Body != tc.sent || got[1].Path != "/second" || got[1].Body != "" {
				t.Fatalf("the upstream got %+v, want /first %q then /second", got, tc.sent)
			}
		})
	}
}

// A request head that arrives a few bytes at a time (so it is never
// whole in the buffer) is read as the same head arriving at once, and a
// body shorter than its Content-Length never takes the bytes of the
// request after it as its own: they are its body, and what follows
// them is the next request.
func TestSplitHeadAndShortBody(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-split")
	rc := dialRaw(t, f)
	n := f.up.count()
	head := f.head("POST", "/split", h, "Content-Length: 5\r\n") + "hello"
	for i := 0; i < len(head); i += 7 {
		rc.send(head[i:min(i+7, len(head))])
	}
	resp, _ := rc.response("POST")
	if resp.StatusCode != 200 {
		t.Fatalf("split head: %d", resp.StatusCode)
	}
	// Says 10, sends 4, then a request: its first 6 bytes complete the
	// body, and the rest is no request at all.
	second := f.head("GET", "/smuggled", h)
	rc.send(f.head("POST", "/short", h, "Content-Length: 10\r\n") + "abcd" + second)
	resp, _ = rc.response("POST")
	if resp.StatusCode != 200 {
		t.Fatalf("short body: %d", resp.StatusCode)
	}
	resp, _ = rc.response("GET")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the rest of the smuggled request: %d, want 400", resp.StatusCode)
	}
	got := f.up.since(n)
	if len(got) != 2 || got[0].Path != "/split" || got[0].Body != "hello" || got[1].Path != "/short" || got[1].Body != "abcd"+second[:6] {
		t.Fatalf("the upstream got %+v", got)
	}
}

// since returns the requests the upstream saw after its first n.
func (u *upstream) since(n int) []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen[n:])
}

// The Host header of an absolute-form request must name the target's
// host and port, whichever parser read the head: a plugin cannot send
// a request checked against one host to another (the fast path keeps the
// header's Host for parseTarget to compare, as the slow path does).
func TestAbsoluteFormHostMismatch(t *testing.T) {
	f := newFixture(t, nil)
	h := f.issue(t, "api.write", "inv-host")
	port := f.url("")[len("http://api.example.com:"):]
	for _, tc := range []struct {
		name, target, host string
		status             int
		code               string
	}{
		{"other host", "http://api.example.com:" + port + "/x", "b.a.example.org:" + port, 400, CodeHostMismatch},
		{"other port", "http://api.example.com:" + port + "/x", "api.example.com:1", 400, CodeHostMismatch},
		{"port left out", "http://api.example.com:" + port + "/x", "api.example.com", 400, CodeHostMismatch},
		{"case and trailing dot", "http://api.example.com:" + port + "/x", "API.Example.COM.:" + port, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := f.up.count()
			rc := dialRaw(t, f)
			rc.send("GET " + tc.target + " HTTP/1.1\r\nHost: " + tc.host + "\r\nProxy-Authorization: Bearer " + h + "\r\n\r\n")
			resp, _ := rc.response("GET")
			if resp.StatusCode != tc.status || resp.Header.Get(HeaderError) != tc.code {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, resp.Header.Get(HeaderError), tc.status, tc.code)
			}
			if tc.status != 200 && f.up.count() != n {
				t.Fatal("a refused request reached the upstream")
			}
			if tc.status == 200 {
				if got := f.up.since(n); len(got) != 1 || got[0].Host != "api.example.com:"+port {
					t.Fatalf("the upstream got %+v, want Host api.example.com:%s", got, port)
				}
			}
		})
	}
}
