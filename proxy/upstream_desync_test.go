package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// rawServer is a TLS server for name, with a certificate from ca, that
// answers each request on a connection with the bytes answer returns
// for it, written as they are: a hostile or broken server's framing,
// which net/http's server would never produce; an HTTP/1.0 answer
// closes the connection. answer may write more
// itself (late bytes) through w. It returns the server's port.
func rawServer(t *testing.T, ca *testenv.CA, name string, answer func(n int, r *http.Request, w io.Writer) string) int {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, name)},
		// Full-size records from the first byte, so that a test can
		// place record boundaries.
		DynamicRecordSizingDisabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var reqs atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					a := answer(int(reqs.Add(1)), r, c)
					if _, err := io.WriteString(c, a); err != nil || strings.HasPrefix(a, "HTTP/1.0") {
						return // an HTTP/1.0 answer ends with the connection
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// rawUpstream is the upstream client against a rawServer.
func rawUpstream(t *testing.T, answer func(n int, r *http.Request, w io.Writer) string) (*upstreamClient, string) {
	t.Helper()
	ca := testenv.NewCA(t)
	port := rawServer(t, ca, "up.example.com", answer)
	return loopbackUpstreamClient(t, ca), "https://up.example.com:" + strconv.Itoa(port)
}

// okFor is a well-framed answer naming the request it answers.
func okFor(r *http.Request) string {
	body := "real answer to " + r.URL.Path
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// A response the proxy reads to its end but after which the upstream
// sent more bytes (a 204 or a HEAD answer with a body, a second response
// to one request, bytes after a Content-Length body) must not leave its
// connection in the pool: the next request on it would read those
// bytes as its answer, and every later request on the connection would
// get the answer to the request before it, so one plugin's answer (an
// upstream's echo of its credential) would reach another plugin.
func TestUpstreamLeftoverBytesNeverAnswerTheNextRequest(t *testing.T) {
	const fake = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
	cases := []struct {
		name   string
		method string
		first  string
		late   bool // the extra bytes come after the response, not with it
	}{
		{"204 with a body", "GET", "HTTP/1.1 204 No Content\r\nContent-Length: " + strconv.Itoa(len(fake)) + "\r\n\r\n" + fake, false},
		{"204 then a response", "GET", "HTTP/1.1 204 No Content\r\n\r\n" + fake, false},
		{"HEAD answered with a body", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(fake)) + "\r\n\r\n" + fake, false},
		{"304 with a body", "GET", "HTTP/1.1 304 Not Modified\r\n\r\n" + fake, false},
		{"bytes after the body", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + fake, false},
		{"a second response, late", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true},
		{"204 then a late response", "GET", "HTTP/1.1 204 No Content\r\n\r\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sent, wrote := make(chan struct{}), make(chan struct{})
			u, base := rawUpstream(t, func(n int, r *http.Request, w io.Writer) string {
				if n == 1 {
					if tc.late {
						go func() {
							<-sent
							_, _ = io.WriteString(w, fake)
							close(wrote)
						}()
					}
					return tc.first
				}
				return okFor(r)
			})
			req, _ := http.NewRequest(tc.method, base+"/first", nil)
			resp, err := u.RoundTrip(req, testCred)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			close(sent)
			if tc.late {
				<-wrote // on loopback, in the proxy's socket once written
			}
			for _, p := range []string{"/second", "/third"} {
				_, body := get(t, u, "GET", base+p, nil)
				if body != "real answer to "+p {
					t.Fatalf("GET %s got %q: the upstream connection was reused with bytes left on it", p, body)
				}
			}
		})
	}
}

// Bytes past a response can also wait inside the TLS layer, decrypted
// but not yet taken by the connection's buffered reader, with nothing
// buffered and nothing on the socket: a TLS record longer than the
// reader's free space, split at the response's end. Here a trailer line
// straddles two full records, so the reader's refill takes exactly the
// rest of the response from the second record and leaves a whole
// response in the TLS layer.
func TestUpstreamLeftoverInsideTLSRecord(t *testing.T) {
	const record = 16384 // TLS's maximum plaintext per record
	fake := "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
	head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	// Record one: head, one chunk, the last chunk, and the start of a
	// trailer line as long as the fake response.
	n := record - len(head) - len("XXXX\r\n") - len("\r\n0\r\n") - len(fake)
	first := head + strconv.FormatInt(int64(n), 16) + "\r\n" + strings.Repeat("d", n) + "\r\n0\r\n" +
		"X: " + strings.Repeat("t", len(fake)-3)
	// Record two: the rest of the trailer line and the end of the
	// trailers, then the fake response.
	second := strings.Repeat("t", record-len(fake)-4) + "\r\n\r\n" + fake
	if len(first) != record || len(second) != record {
		t.Fatalf("records of %d and %d bytes, want %d", len(first), len(second), record)
	}
	u, base := rawUpstream(t, func(n int, r *http.Request, _ io.Writer) string {
		if n == 1 {
			return first + second
		}
		return okFor(r)
	})
	if _, body := get(t, u, "GET", base+"/first", nil); len(body) != len(first)-len(head)-len("XXXX\r\n\r\n0\r\n")-len(fake) {
		t.Fatalf("first body: %d bytes", len(body))
	}
	for _, p := range []string{"/second", "/third"} {
		if _, body := get(t, u, "GET", base+p, nil); body != "real answer to "+p {
			t.Fatalf("GET %s got %q: the connection was reused with a response waiting in its TLS layer", p, body)
		}
	}
}

// Bytes past a response can end inside a TLS record whose rest is still
// on its way: the TLS layer holds the record's start as ciphertext it
// cannot decrypt yet, with nothing buffered and nothing on the socket.
// Here the upstream's first answer comes in one write with the first
// bytes of a second response's record; it sends the rest only when
// another request arrives on that connection.
func TestUpstreamLeftoverRecordStart(t *testing.T) {
	const fake = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
	ca := testenv.NewCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "up.example.com")}}
	var conns atomic.Int32
	go func() {
		for {
			raw, err := l.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go func() {
				defer raw.Close()
				hc := &testenv.HeldConn{Conn: raw}
				tc := tls.Server(hc, cfg)
				br := bufio.NewReader(tc)
				var rest []byte
				for n := 1; ; n++ {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					if !first || n > 1 {
						// The smuggled response's end, then the real answer.
						_, _ = raw.Write(rest)
						_, _ = io.WriteString(tc, okFor(r))
						continue
					}
					hc.Hold = true
					_, _ = io.WriteString(tc, okFor(r))
					_, _ = io.WriteString(tc, fake)
					hc.Hold = false
					end := 5 + (int(hc.Held[3])<<8 | int(hc.Held[4])) + 3 // 3 bytes into the fake's record
					rest = hc.Held[end:]
					if _, err := raw.Write(hc.Held[:end]); err != nil {
						return
					}
				}
			}()
		}
	}()
	u := loopbackUpstreamClient(t, ca)
	t.Cleanup(u.CloseIdleConnections)
	base := "https://up.example.com:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	for _, p := range []string{"/first", "/second", "/third"} {
		if _, body := get(t, u, "GET", base+p, nil); body != "real answer to "+p {
			t.Fatalf("GET %s got %q: the connection was reused with the start of a record in its TLS layer", p, body)
		}
	}
}
