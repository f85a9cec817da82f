package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/host/control"
)

// mcpPath is where the control API's listener serves the MCP endpoint
// (host/mcp.Path).
const mcpPath = "/v1/mcp"

// HostMCP is the `host.mcp:` section: the MCP endpoint (streamable HTTP
// at /v1/mcp) on the control API's listener, behind its authentication.
// Off unless Enabled.
type HostMCP struct {
	Enabled bool `yaml:"enabled"`
	// CallTimeout bounds each tools/call, a wait for approval included
	// (default 60s, at most 1h).
	CallTimeout time.Duration `yaml:"call_timeout"`
	// ApprovalHold is how long a call held for approval waits before the
	// tool answers that it is pending (default 0: at once).
	ApprovalHold time.Duration `yaml:"approval_hold"`
	// SessionIdle closes a session unused for this long (default 1h, at
	// most 24h).
	SessionIdle time.Duration `yaml:"session_idle"`
	// MaxSessions bounds the sessions one principal holds at once
	// (default 64, at most 10000).
	MaxSessions int `yaml:"max_sessions"`
	// WriteTimeout bounds each write of a response (an SSE event): a
	// client that stops reading a stream has it dropped then (default
	// 30s, at most 10m).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// ResourceURL is the endpoint's URL as its clients reach it
	// (https://NAME[:PORT]/v1/mcp): the OAuth resource identifier the
	// host advertises (RFC 9728) when host.control_principals.jwt is
	// set. Unset, it is derived from the control API's listening
	// address when that is one address (not all interfaces, not a
	// unix socket), never from a request's Host header.
	ResourceURL string `yaml:"resource_url"`
	// Scopes are advertised as the resource's scopes_supported, for
	// the authorization request of a client (none: not advertised).
	// The host checks none: the policy decides.
	Scopes []string `yaml:"scopes"`
}

// Validate returns every problem of the section at once.
func (m HostMCP) Validate() error {
	var errs []error
	if m.CallTimeout < 0 || m.CallTimeout > time.Hour {
		errs = append(errs, errors.New("host.mcp.call_timeout: must be between 0 and 1h"))
	}
	if m.ApprovalHold < 0 || m.ApprovalHold > time.Hour {
		errs = append(errs, errors.New("host.mcp.approval_hold: must be between 0 and 1h"))
	}
	if m.SessionIdle < 0 || m.SessionIdle > 24*time.Hour {
		errs = append(errs, errors.New("host.mcp.session_idle: must be between 0 and 24h"))
	}
	if m.MaxSessions < 0 || m.MaxSessions > 10000 {
		errs = append(errs, errors.New("host.mcp.max_sessions: must be between 0 and 10000"))
	}
	if m.WriteTimeout < 0 || m.WriteTimeout > 10*time.Minute {
		errs = append(errs, errors.New("host.mcp.write_timeout: must be between 0 and 10m"))
	}
	if m.ResourceURL != "" {
		if u, err := control.CheckResourceURL(m.ResourceURL); err != nil {
			errs = append(errs, fmt.Errorf("host.mcp.resource_url: %w", err))
		} else if u.Path != mcpPath {
			errs = append(errs, errors.New("host.mcp.resource_url: its path must be "+mcpPath+", where the endpoint is served"))
		}
	}
	for i, sc := range m.Scopes {
		if sc == "" || strings.ContainsFunc(sc, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
			errs = append(errs, fmt.Errorf("host.mcp.scopes[%d]: not an OAuth scope token (printable ASCII, no space, quote or backslash)", i))
		}
	}
	return errors.Join(errs...)
}
