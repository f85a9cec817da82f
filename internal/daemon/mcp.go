package daemon

import (
	"net/http"

	"github.com/airlock-dev/airlock/host/control"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/internal/config"
)

// withMCP serves the MCP endpoint beside the control API when host.mcp
// is enabled: on the same listener and behind the same authentication,
// so that an agent is the principal its credential names, and its calls
// take the control API's invoke path. The server ends its sessions when
// the control API shuts down.
func (n *hostNode) withMCP(cfg *config.Config, ctl *control.Handler, version string) http.Handler {
	if !cfg.Host.MCP.Enabled {
		return ctl
	}
	m := hostmcp.New(n.h, hostmcp.Options{CallTimeout: cfg.Host.MCP.CallTimeout, ApprovalHold: cfg.Host.MCP.ApprovalHold,
		SessionIdle: cfg.Host.MCP.SessionIdle, MaxSessions: cfg.Host.MCP.MaxSessions, WriteTimeout: cfg.Host.MCP.WriteTimeout,
		Version: version, Log: n.log})
	n.mcp = m
	n.closers = append(n.closers, func() { _ = m.Close() })
	mux := http.NewServeMux()
	mux.Handle("/", ctl)
	mux.Handle(hostmcp.Path, m.Handler())
	n.log.Info("MCP endpoint enabled on the control API's listener", "path", hostmcp.Path)
	return mux
}
