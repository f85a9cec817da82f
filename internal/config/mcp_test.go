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
	cfg, err = Parse([]byte("version: v1\nhost:\n  mcp: {call_timeout: 2h, approval_hold: -1s, session_idle: 25h, max_sessions: -1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "host.mcp.call_timeout") || !strings.Contains(err.Error(), "host.mcp.approval_hold") ||
		!strings.Contains(err.Error(), "host.mcp.session_idle") || !strings.Contains(err.Error(), "host.mcp.max_sessions") {
		t.Fatalf("out-of-range section: %v", err)
	}
}
