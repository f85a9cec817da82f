package proxy

import (
	"strings"
	"testing"
	"time"
)

// A client that hangs up while the upstream has not answered ends the
// upstream request at once (not at response_header_timeout), with or
// without a request body, and the audit line says client_closed_request,
// never 200.
func TestClientHangupCancelsUpstream(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Upstream.ResponseTimeout = 10 * time.Minute })
	h := f.issue(t, "api.write", "inv-hangup")
	for _, tt := range []struct{ name, req string }{
		{"/hangup-get", f.head("GET", "/hangup-get", h)},
		{"/hangup-post", f.head("POST", "/hangup-post", h, "Content-Length: 5\r\n") + "hello"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, f)
			n := f.up.count() // before the send: the upstream may count it at once
			rc.send(tt.req)
			for f.up.count() == n || f.up.last(t).Path != tt.name {
				time.Sleep(5 * time.Millisecond)
			}
			rc.c.Close()
			select {
			case got := <-f.up.hungUp:
				if got != tt.name {
					t.Fatalf("upstream gave up %s, want %s", got, tt.name)
				}
			case <-time.After(time.Minute):
				t.Fatal("the upstream request outlived its client")
			}
			for !strings.Contains(f.audit.String(), `"path":"`+tt.name+`"`) {
				time.Sleep(5 * time.Millisecond)
			}
			for _, line := range strings.Split(f.audit.String(), "\n") {
				if strings.Contains(line, `"path":"`+tt.name+`"`) &&
					(!strings.Contains(line, `"code":"client_closed_request"`) || strings.Contains(line, `"status":200`)) {
					t.Fatalf("audit: %s", line)
				}
			}
		})
	}
}
