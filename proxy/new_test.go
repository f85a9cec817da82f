package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The zero Config and zero Options are safe: New fills the defaults and a
// missing broker is an error, not a panic on the first request.
func TestNewZeroValues(t *testing.T) {
	if _, err := New(Config{}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "broker") {
		t.Fatalf("nil broker: %v", err)
	}
	f := newFixture(t, nil)
	s, err := New(Config{}, f.b, Options{})
	if err != nil {
		t.Fatalf("zero config: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	// A request with no handle gets the proxy's 407, so the echo guard and
	// audit defaults were in place.
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(mustURL(t, "http://"+l.Addr().String()))}}
	resp, err := c.Get("http://api.example.com/v1/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("status %d, want 407", resp.StatusCode)
	}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Serve's background work (the limiter sweep) ends before Serve returns,
// also when Serve returns because its listener failed while its context
// is still live: nothing of the proxy runs on after Serve.
func TestServeJoinsBackgroundWork(t *testing.T) {
	f := newFixture(t, nil)
	s, err := New(Config{}, f.b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's own proxy starts its background work before it
	// serves: once it has answered a request, none of its goroutines is
	// new (a dial alone proves nothing: the kernel accepts into the
	// backlog before Serve runs).
	resp, err := http.Get("http://" + f.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	// Serve is accepting once a connection is answered.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.Close() // the listener fails; ctx stays live
	if err := <-done; err == nil {
		t.Fatal("Serve returned no error for a closed listener")
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("Serve returned, its goroutines did not: %v", err)
	}
}
