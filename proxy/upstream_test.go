package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// upstreamFixture is the upstream client against a TLS server that counts
// new connections.
func upstreamFixture(t *testing.T, h http.HandlerFunc) (*upstreamClient, string, *atomic.Int32, *httptest.Server) {
	t.Helper()
	ca := testenv.NewCA(t)
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "up.example.com")}}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return loopbackUpstreamClient(t, ca), "https://up.example.com:" + port, &conns, srv
}

// loopbackUpstreamClient is an upstream client that trusts ca and finds
// up.example.com on 127.0.0.1.
func loopbackUpstreamClient(t *testing.T, ca *testenv.CA) *upstreamClient {
	t.Helper()
	res := &staticResolver{}
	res.set("up.example.com", "127.0.0.1")
	cfg := Config{AllowCIDRs: []string{"127.0.0.0/8"}, UpstreamCAFile: ca.PEMFile}.WithDefaults()
	d := &dialer{resolver: res, policy: &addressPolicy{allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, timeout: time.Second}
	tc, err := newTLSConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newUpstreamClient(cfg, d, tc)
}

// testCred is the credential the upstream client tests send for.
var testCred = credKey{plugin: "plugin-1", intent: "api.write", version: 1}

func get(t *testing.T, u *upstreamClient, method, url string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	resp, err := u.RoundTrip(req, testCred)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestUpstreamReuseAndFraming(t *testing.T) {
	u, base, conns, _ := upstreamFixture(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("part1,"))
			w.(http.Flusher).Flush()
			w.Write([]byte("part2"))
		case "/early-hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Write([]byte("final"))
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("hello"))
		}
	})
	for i := range 5 {
		if _, body := get(t, u, "GET", base+"/", nil); body != "hello" {
			t.Fatalf("request %d: %q", i, body)
		}
	}
	if _, body := get(t, u, "GET", base+"/chunked", nil); body != "part1,part2" {
		t.Fatalf("chunked: %q", body)
	}
	resp, body := get(t, u, "HEAD", base+"/", nil)
	if body != "" || resp.ContentLength != 5 {
		t.Fatalf("HEAD: %q CL %d", body, resp.ContentLength)
	}
	if resp, body := get(t, u, "GET", base+"/early-hints", nil); resp.StatusCode != 200 || body != "final" {
		t.Fatalf("103 then 200: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, u, "GET", base+"/nocontent", nil); resp.StatusCode != 204 {
		t.Fatalf("204: %d", resp.StatusCode)
	}
	if _, body := get(t, u, "GET", base+"/", nil); body != "hello" {
		t.Fatal("after 204")
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for sequential requests, want 1 (reuse)", n)
	}
}

// The upstream drops idle connections; the next idempotent request is
// retried on a fresh one instead of failing.
func TestUpstreamStaleConnectionRetry(t *testing.T) {
	u, base, conns, srv := upstreamFixture(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	get(t, u, "GET", base+"/", nil)
	srv.CloseClientConnections() // the pooled connection is now dead
	waitPooledDead(t, u)
	if _, body := get(t, u, "GET", base+"/", nil); body != "ok" {
		t.Fatalf("after the upstream closed the connection: %q", body)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections %d, want 2", n)
	}
}

// A body that cannot be replayed is never retried, so it takes a pooled
// connection only when a liveness check shows the upstream kept it open;
// a connection the upstream closed is passed over for a fresh one.
func TestUpstreamNonReplayableBodyChecksPooledConnection(t *testing.T) {
	u, base, conns, srv := upstreamFixture(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, strconv.Itoa(len(b)))
	})
	post := func() string {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/", io.NopCloser(strings.NewReader("streamed")))
		req.ContentLength = -1
		resp, err := u.RoundTrip(req, testCred)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	get(t, u, "GET", base+"/", nil)
	if b := post(); b != "8" || conns.Load() != 1 {
		t.Fatalf("body %q, connections %d (want the live pooled one)", b, conns.Load())
	}
	srv.CloseClientConnections() // the pooled connection is now dead
	waitPooledDead(t, u)
	if b := post(); b != "8" || conns.Load() != 2 {
		t.Fatalf("body %q, connections %d (want a fresh one for the dead pooled one)", b, conns.Load())
	}
}

// A response abandoned half-way closes its connection instead of reading
// the rest, and is not pooled.
func TestUpstreamAbandonedBody(t *testing.T) {
	wrote := make(chan error, 1)
	u, base, conns, _ := upstreamFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/huge" {
			io.WriteString(w, "ok")
			return
		}
		chunk := make([]byte, 64<<10)
		var err error
		for i := 0; i < 16384 && err == nil; i++ { // up to 1 GiB
			_, err = w.Write(chunk)
		}
		wrote <- err
	})
	req, _ := http.NewRequest("GET", base+"/huge", nil)
	resp, err := u.RoundTrip(req, testCred)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 1024))
	start := time.Now()
	resp.Body.Close()
	if time.Since(start) > 2*time.Second {
		t.Fatal("Close read the rest of the body")
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the upstream wrote the whole body: the connection was not closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream is still writing")
	}
	get(t, u, "GET", base+"/", nil)
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections %d, want 2 (the abandoned one not reused)", n)
	}
}

func TestUpstreamCancel(t *testing.T) {
	block := make(chan struct{})
	u, base, _, _ := upstreamFixture(t, func(w http.ResponseWriter, r *http.Request) { <-block })
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/", nil)
	start := time.Now()
	if _, err := u.RoundTrip(req, testCred); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("cancellation did not unblock the read")
	}
}

// waitPooledDead waits until the close of u's one pooled connection has
// arrived, so the next request's liveness check sees it (the close is
// the upstream's, asynchronous to the test).
func waitPooledDead(t *testing.T, u *upstreamClient) {
	t.Helper()
	for limit := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		u.idle.mu.Lock()
		pc := u.idle.lru.head
		u.idle.mu.Unlock()
		if pc == nil {
			t.Fatal("no pooled connection")
		}
		if !pc.Alive() {
			return
		}
		if time.Now().After(limit) {
			t.Fatal("the pooled connection still looks alive after the upstream closed it")
		}
	}
}
