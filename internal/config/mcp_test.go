package config

import (
	"strings"
	"testing"
)

// host.mcp parses from the file, and Validate names each bound it
// exceeds.
func TestMCPConfig(t *testing.T) {
	cfg, err := Parse([]byte("version: v1\nhost:\n  mcp: {enabled: true, call_timeout: 2m, approval_hold: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Host.MCP; !m.Enabled || m.CallTimeout.Minutes() != 2 || m.ApprovalHold.Seconds() != 5 {
		t.Fatalf("parsed: %+v", m)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid section refused: %v", err)
	}
	cfg, err = Parse([]byte("version: v1\nhost:\n  mcp: {call_timeout: 2h, approval_hold: -1s, session_idle: 25h, max_sessions: -1, write_timeout: 11m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "host.mcp.call_timeout") || !strings.Contains(err.Error(), "host.mcp.approval_hold") ||
		!strings.Contains(err.Error(), "host.mcp.session_idle") || !strings.Contains(err.Error(), "host.mcp.max_sessions") ||
		!strings.Contains(err.Error(), "host.mcp.write_timeout") {
		t.Fatalf("out-of-range section: %v", err)
	}
}

// host.mcp.resource_url is the endpoint's absolute URL; scopes are
// OAuth scope tokens.
func TestMCPResourceURLConfig(t *testing.T) {
	for _, tc := range []struct {
		resource string
		scopes   []string
		bad      string
	}{
		{"https://agents.example/v1/mcp", []string{"airlock.tools"}, ""},
		{"http://127.0.0.1:7070/v1/mcp", nil, ""},
		{"http://agents.example/v1/mcp", nil, "host.mcp.resource_url"},
		{"https://agents.example/mcp", nil, "host.mcp.resource_url"},
		{"https://agents.example/v1/mcp?x=1", nil, "host.mcp.resource_url"},
		{"", []string{"a b"}, "host.mcp.scopes[0]"},
		{"", []string{"ok", ""}, "host.mcp.scopes[1]"},
	} {
		err := HostMCP{ResourceURL: tc.resource, Scopes: tc.scopes}.Validate()
		if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%q %q: %v", tc.resource, tc.scopes, err)
		}
	}
}
