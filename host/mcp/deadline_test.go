package mcp_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// bigCall is a host whose stub tool answers with a result of size
// bytes, served with opts on small buffers, and a session of agent's:
// it returns the fixture, the session, and the raw request of a call to
// the tool on it.
func bigCall(t *testing.T, opts hostmcp.Options, size int, started chan struct{}) (*fixture, string) {
	t.Helper()
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", size) + `"}`)
	f := newFixtureServe(t, opts, allowAll, func(h *host.Host) error {
		return h.Add("stub", host.KindExecuta, func(context.Context) (host.Runtime, error) {
			return &stub{exited: make(chan struct{}), out: big, started: started}, nil
		})
	}, func(h http.Handler) (string, map[string]string) {
		return serveMCPOn(t, testenv.SmallSendBuffers, h, "agent")
	})
	session := openSession(t, f, "agent")
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"stub__echo","arguments":{}}}`
	return f, callHead(f, "agent", session, len(body)) + body
}

// openSession initializes a session of principal's and returns its id.
func openSession(t *testing.T, f *fixture, principal string) string {
	t.Helper()
	resp := post(t, f.url, f.tokens[principal], "", initialize)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	if resp := post(t, f.url, f.tokens[principal], session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return session
}

// callHead is the raw head of a POST of n bytes on session, for a client
// that writes its request itself.
func callHead(f *fixture, principal, session string, n int) string {
	u, _ := url.Parse(f.url)
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\n"+
		"Mcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n",
		cmp.Or(u.Path, "/"), u.Host, f.tokens[principal], session, n)
}

// A client that asks for a stream and never reads it does not hold the
// server: the write that finds the connection's buffers full fails at
// the write timeout, and every goroutine its request started ends while
// the client still holds the connection open.
func TestStalledStreamEnds(t *testing.T) {
	// Both ends' buffers small, and a result far larger than they hold.
	started := make(chan struct{}, 1)
	f, call := bigCall(t, hostmcp.Options{WriteTimeout: 300 * time.Millisecond}, 1<<20, started)
	leaks := testenv.CheckGoroutines(t)
	u, _ := url.Parse(f.url)
	testenv.SendUnread(t, "tcp", u.Host, call)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not reach the plugin")
	}
	// The connection stays open and unread while the goroutines are
	// counted.
	leaks()
}

// A client that reads a large result just fast enough for each piece to
// make the write timeout does not hold it past the call's bound and one
// write timeout: the rest is cut off then.
func TestSlowReaderOfLargeResultBounded(t *testing.T) {
	const size = 2 << 20
	f, call := bigCall(t, hostmcp.Options{CallTimeout: time.Second, WriteTimeout: 2 * time.Second}, size, nil)
	leaks := testenv.CheckGoroutines(t)
	u, _ := url.Parse(f.url)
	conn := testenv.SendUnread(t, "tcp", u.Host, call)
	// About 6 s for the whole answer at this rate.
	total := testenv.ReadSlowly(conn, size)
	if total >= size {
		t.Fatalf("the whole result (%d bytes) was delivered past the call's bound", total)
	}
	leaks()
}

// A client that sends a POST's headers and then stops its body does not
// hold the request's goroutine: the body must arrive within the write
// timeout (per 64 KiB), and the connection is dropped when it does not.
func TestStalledBodyEnds(t *testing.T) {
	f := newFixtureOpts(t, hostmcp.Options{WriteTimeout: 300 * time.Millisecond}, allowAll, nil, "agent")
	leaks := testenv.CheckGoroutines(t)
	u, _ := url.Parse(f.url)
	conn := testenv.SendUnread(t, "tcp", u.Host, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":",
		cmp.Or(u.Path, "/"), u.Host, f.tokens["agent"]))
	// A bound for the test, not the host's.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the connection was kept: %v", err)
	}
	conn.Close()
	leaks()
}
