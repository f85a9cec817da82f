package config

import (
	"errors"
	"time"
)

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
	return errors.Join(errs...)
}
