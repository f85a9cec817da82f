package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// Every reuse of a pooled upstream connection checks its socket
// (upstream.go); the check is made once per connection so that it
// allocates nothing per request, and it sees bytes the upstream sent
// while the connection was idle.
func TestIdleProbe(t *testing.T) {
	late := make(chan io.Writer, 1)
	u, url := rawUpstream(t, func(n int, r *http.Request, w io.Writer) string {
		late <- w
		return okFor(r)
	})
	req, _ := http.NewRequest("GET", url+"/x", nil)
	resp, err := u.RoundTrip(req, testCred)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var pc *upConn
	for _, v := range u.idle.byKey {
		pc = v[0]
	}
	if pc == nil || !pc.probe.check() {
		t.Fatal("a pooled connection with nothing sent on it is not idle")
	}
	if n := testing.AllocsPerRun(100, func() { pc.probe.check() }); n != 0 {
		t.Errorf("a socket check allocates %v times", n)
	}
	w := <-late
	if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\n"); err != nil {
		t.Fatal(err)
	}
	// Wait for the bytes to cross loopback (no speed asserted).
	for deadline := time.Now().Add(10 * time.Second); pc.probe.check(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("bytes sent on an idle connection never seen by the check")
		}
	}
}
