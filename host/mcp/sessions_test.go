package mcp_test

import (
	"net/http"
	"testing"

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
