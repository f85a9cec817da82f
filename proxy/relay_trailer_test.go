package proxy

import (
	"testing"
)

// Trailers a hostile upstream sends unannounced or announced are relayed
// as trailers, never as anything that frames a message: a trailer field
// RFC 9110 §6.5.1 forbids (Content-Length, Transfer-Encoding, Host,
// Trailer, …) is dropped, the others pass.
func TestRelayDropsFramingTrailers(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct{ name, head string }{
		{"unannounced", ""},
		{"announced", "Trailer: X-Ok, Content-Type\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, base := echoUpstream(t, f, func(string) string {
				return "HTTP/1.1 200 OK\r\n" + tc.head + "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" +
					"X-Ok: 1\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\nHost: evil.example.net\r\nContent-Type: text/evil\r\n\r\n"
			})
			rc := dialRaw(t, f)
			rc.send(getHead(base, "/x", h))
			resp, body := rc.response("GET")
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			if resp.Trailer.Get("X-Ok") != "1" {
				t.Fatalf("the plain trailer was lost: %v", resp.Trailer)
			}
			for _, k := range []string{"Content-Length", "Transfer-Encoding", "Host", "Content-Type"} {
				if _, ok := resp.Trailer[k]; ok {
					t.Fatalf("the trailer %s reached the plugin: %v", k, resp.Trailer)
				}
			}
			// The connection still carries the next request.
			rc.send(getHead(base, "/y", h))
			if resp, _ := rc.response("GET"); resp.StatusCode != 200 {
				t.Fatalf("next request: %d", resp.StatusCode)
			}
		})
	}
}
