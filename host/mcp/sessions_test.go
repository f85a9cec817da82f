package mcp_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// A principal holds at most Options.MaxSessions sessions at once: one
// agent opening sessions without end cannot exhaust the host, nor take
// the sessions of another principal; one it ends makes room.
func TestSessionsPerPrincipal(t *testing.T) {
	f := newFixtureOpts(t, hostmcp.Options{MaxSessions: 2}, allowAll, nil, "agent", "other")
	var ids []string
	for range 2 {
		resp := post(t, f.url, f.tokens["agent"], "", initialize)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: %d", resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get("Mcp-Session-Id"))
	}
	if resp := post(t, f.url, f.tokens["agent"], "", initialize); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a session over the bound: %d", resp.StatusCode)
	}
	if resp := post(t, f.url, f.tokens["other"], "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("another principal's session: %d", resp.StatusCode)
	}
	if resp := deleteSession(t, f.url, f.tokens["agent"], ids[0]); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if resp := post(t, f.url, f.tokens["agent"], "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("a session after one ended: %d", resp.StatusCode)
	}
}

// A host restart ends every session: sessions live in the host's memory.
// The agent's next request on its old session gets 404, which the MCP
// specification tells a client to answer with a new initialize, and a
// new session lists and calls tools at once.
func TestSessionAfterRestart(t *testing.T) {
	var cur atomic.Pointer[http.Handler]
	f := newFixtureServe(t, hostmcp.Options{}, allowAll, func(h *host.Host) error { return addStub(h, "stub") },
		func(h http.Handler) (string, map[string]string) {
			cur.Store(&h)
			return serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cur.Load()).ServeHTTP(w, r) }), "agent")
		})
	tok := f.tokens["agent"]
	old := connect(t, f.url, tok, nil)
	waitTool(t, old, nil, "stub__echo", true)
	resp := post(t, f.url, tok, "", initialize)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	// The restarted host's MCP server, on the same listener and
	// credentials.
	next := hostmcp.New(f.h, hostmcp.Options{})
	t.Cleanup(func() { _ = next.Close() })
	h := next.Handler()
	cur.Store(&h)
	if resp := post(t, f.url, tok, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request on a session from before the restart: %d, want 404", resp.StatusCode)
	}
	if _, err := old.ListTools(context.Background(), nil); err == nil {
		t.Fatal("the Go SDK client's session from before the restart still answers")
	}
	cs := connect(t, f.url, tok, nil)
	waitTool(t, cs, nil, "stub__echo", true)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stub__echo", Arguments: map[string]any{"say": "again"}})
	if err != nil || res.IsError {
		t.Fatalf("a call on a new session: %+v %v", res, err)
	}
}
