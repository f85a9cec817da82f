package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A request without a body that outlasts the read deadline its head
// was read under (read_header_timeout for a connection's first request,
// idle_timeout after) is not taken for a hung-up client: the hangup
// watch's read must not inherit that deadline, or a long GET (a stream
// of events, a slow report) is cut off as client_closed_request while
// its client still reads.
func TestLongGetOutlastsHeadDeadline(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Limits.ReadHeaderTimeout = 300 * time.Millisecond })
	h := f.issue(t, "api.write", "inv-long-get")
	c := dialRaw(t, f).c
	port := strconv.Itoa(f.up.port)
	io.WriteString(c, "GET http://api.example.com:"+port+"/events HTTP/1.1\r\nHost: api.example.com:"+port+"\r\n"+
		"Proxy-Authorization: Bearer "+h+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wantStatus(t, resp.StatusCode, 200)
	f.up.events <- "first;"
	// Past the head's deadline, and past the hangup watch's start.
	time.Sleep(3 * f.proxy.cfg.Limits.ReadHeaderTimeout)
	select {
	case f.up.events <- "second;":
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream stream ended: the proxy took the client for gone")
	}
	close(f.up.events)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "first;second;" {
		t.Fatalf("body %q, %v", body, err)
	}
}
