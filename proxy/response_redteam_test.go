package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Response heads and framings a hostile upstream may send, through the
// whole proxy: what the plugin gets is framed as net/http frames the
// upstream's answer (the fast response path or its fallback), a head
// net/http refuses is a 502, and the injected secret echoed anywhere in
// the answer is redacted.
func TestHostileUpstreamResponses(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name, answer string // {s}: the secret the upstream received
		status       int
		body         string
	}{
		{"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", 200, "ok"},
		{"100 then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok"},
		{"103 with the secret, then 200", "HTTP/1.1 103 Early Hints\r\nLink: {s}\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok"},
		{"101 unasked", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", 502, ""},
		{"status of four digits", "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok", 502, ""},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!", 502, ""},
		{"chunked beats a length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n2\r\nok\r\n0\r\n\r\n", 200, "ok"},
		{"secret in a header", "HTTP/1.1 200 OK\r\nX-Echo: a{s}b\r\nContent-Length: 2\r\n\r\nok", 200, "ok"},
		{"secret in a folded header", "HTTP/1.0 200 OK\r\nX-Echo: a\r\n {s}\r\nContent-Length: 2\r\n\r\nok", 200, "ok"},
		{"secret in a close-delimited body", "HTTP/1.0 200 OK\r\n\r\n<{s}>", 200, "<"},
		{"secret split across chunks", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{c}0\r\n\r\n", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, base := echoUpstream(t, f, func(secret string) string {
				a := strings.ReplaceAll(tc.answer, "{s}", secret)
				half := len(secret) / 2
				return strings.ReplaceAll(a, "{c}", chunkOf(secret[:half])+chunkOf(secret[half:]))
			})
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, getHead(base, "/x", h))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, resp.Header.Get(HeaderError), tc.status)
			}
			if tc.status == 200 && tc.body != "" && !strings.HasPrefix(string(body), tc.body) {
				t.Fatalf("body %q, want %q", body, tc.body)
			}
			var all strings.Builder
			_ = resp.Header.Write(&all)
			_ = resp.Trailer.Write(&all)
			all.Write(body)
			if strings.Contains(all.String(), testSecret) {
				t.Fatalf("the secret reached the plugin:\n%s", all.String())
			}
		})
	}
}

func chunkOf(s string) string {
	return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n"
}
