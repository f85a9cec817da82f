package writedeadline_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/writedeadline"
)

// The write deadline bounds each write only: a stream that was written
// to, then stayed idle for longer than the timeout, still ends cleanly
// (the server's own last write is not refused by a deadline left
// behind) and its connection serves the next request.
func TestWriteDeadlineCleared(t *testing.T) {
	const d = 50 * time.Millisecond
	srv := httptest.NewServer(writedeadline.Handler(d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("a"))
		_ = http.NewResponseController(w).Flush()
		if r.URL.Path == "/idle" {
			time.Sleep(3 * d) // a stream with nothing to send for longer than the timeout
		}
	})))
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	for i, path := range []string{"/idle", "/"} {
		reused := false
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "a" {
			t.Fatalf("%s: body %q, %v", path, body, err)
		}
		if i == 1 && !reused {
			t.Fatalf("%s: the idle stream's connection was not kept", path)
		}
	}
}
