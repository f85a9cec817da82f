package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// serveControlAPI serves a host's control API (allow-all policy, writes
// bounded to d) as the daemon does, on cfg.Host.Control until the test
// ends, and returns the socket's path.
func serveControlAPI(t *testing.T, cfg *config.Config, d time.Duration) string {
	t.Helper()
	cfg.Host.ControlWriteTimeout = d
	h := host.New(host.Options{Policy: policy.AllowAll()})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	ctl := control.NewHandler(h)
	ctl.SetWriteTimeout(d)
	l, handler, _, err := listenControlAuth(cfg.Host, ctl, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := controlServer(handler)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-served })
	path, _ := strings.CutPrefix(cfg.Host.Control, "unix:")
	return path
}

// A kept-alive control connection serves its next request after the
// write deadline its last answer left for its end has passed, a request
// refused before any route included: each request starts with no write
// deadline, whoever answers it.
func TestControlConnectionOutlivesAnswerDeadline(t *testing.T) {
	cfg := testConfig(t)
	const d = 100 * time.Millisecond
	path := serveControlAPI(t, cfg, d)
	tok, err := peerauth.ReadToken("host.control_token_file", cfg.Host.ControlTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer c.CloseIdleConnections()
	for i, bearer := range []string{tok, ""} {
		req, _ := http.NewRequest(http.MethodGet, "http://airlock/v1/plugins", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		reused := false
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := []int{http.StatusOK, http.StatusUnauthorized}[i]; resp.StatusCode != want || i == 1 && !reused {
			t.Fatalf("request %d: %d (reused %v), want %d on the kept connection", i, resp.StatusCode, reused, want)
		}
		// The caller pauses past the deadline the answer left.
		time.Sleep(3 * d)
	}
}

// A caller the control API refuses (no credential) before any route
// cannot hold the connection's goroutine either: what net/http reads of
// the body it sent after the refusal, or writes of answers it never
// reads, is bounded by host.control_write_timeout as an authenticated
// request's is.
func TestControlRefusedCallerBounded(t *testing.T) {
	path := serveControlAPI(t, testConfig(t), 200*time.Millisecond)
	leaks := testenv.CheckGoroutines(t)
	conn := testenv.SendUnread(t, "unix", path, "POST /v1/invocations HTTP/1.1\r\nHost: airlock\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"plugin\":")
	// A bound for the test, not the host's.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	// The host gives up on the body it waits for and drops the
	// connection, its refusal written or not.
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the connection was kept: %v", err)
	}
	if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 401 ") {
		t.Fatalf("answer %.40q, want a 401 or none", got)
	}
	conn.Close()
	leaks()
}

// A caller without a credential that pipelines requests and never reads
// the refusals does not hold the connection's goroutine once the
// connection's buffers are full: the write of a refusal fails at the
// write timeout and the connection is dropped.
func TestControlUnreadRefusalsBounded(t *testing.T) {
	path := serveControlAPI(t, testConfig(t), 200*time.Millisecond)
	leaks := testenv.CheckGoroutines(t)
	conn := testenv.SendUnread(t, "unix", path, "")
	// Far more refusals than the socket's buffers hold.
	reqs := strings.Repeat("GET /v1/plugins HTTP/1.1\r\nHost: airlock\r\n\r\n", 20000)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		_, _ = conn.Write([]byte(reqs)) // fails once the host drops the connection
	}()
	select {
	case <-sent:
	case <-time.After(20 * time.Second):
		conn.Close()
		<-sent
		t.Fatal("the host kept the connection of a caller that never read its refusals")
	}
	conn.Close()
	leaks()
}
