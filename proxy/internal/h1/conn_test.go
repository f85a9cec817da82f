package h1

import (
	"bufio"
	"net/textproto"
	"strings"
	"testing"
)

// scanHead must find the Host headers textproto finds, however the head
// is spelled.
func FuzzScanHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: a\r\nHOST: b\r\n\r\n",
		"GET / HTTP/1.1\r\nX: y\r\nHost: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost:a\n\n",
		"GET / HTTP/1.1\r\nContent-Length: 3\r\nHost:  a  \r\n\r\nabc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, rest, ok := strings.Cut(s, "\n")
		if !ok {
			return
		}
		hdr, err := textproto.NewReader(bufio.NewReader(strings.NewReader(rest))).ReadMIMEHeader()
		if err != nil {
			return
		}
		hosts, hasCL := scanHead([]byte(s))
		want := hdr["Host"]
		if len(hosts) != len(want) {
			t.Fatalf("scanHead found %q, textproto %q", hosts, want)
		}
		for i := range want {
			if hosts[i] != want[i] {
				t.Fatalf("scanHead found %q, textproto %q", hosts, want)
			}
		}
		if _, ok := hdr["Content-Length"]; ok != hasCL {
			t.Fatalf("Content-Length: scanHead %v, textproto %v", hasCL, ok)
		}
	})
}
