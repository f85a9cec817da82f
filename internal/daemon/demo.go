package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/host"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
)

// demoUpstream is the third-party API of the demo: it checks the secret
// and says, by fingerprint, what it received.
func demoUpstream(secret, fp string, out io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			fmt.Fprintf(out, "demo upstream: %s %s WITHOUT the demo secret -> 401\n", r.Method, r.URL.Path)
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(out, "demo upstream: %s %s carried the demo secret (sha256 %s); the provider only ever held a handle\n", r.Method, r.URL.Path, fp)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/tickets":
			_ = json.NewEncoder(w).Encode([]map[string]string{
				{"id": "DEMO-1", "title": "Rotate the billing API key", "state": "open"},
				{"id": "DEMO-2", "title": "Review plugin manifests", "state": "closed"},
			})
		case r.Method == http.MethodPost && r.URL.Path == "/api/tickets":
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]string{"id": "DEMO-3", "title": "created through airlock", "state": "open"})
		default:
			http.NotFound(w, r)
		}
	})
}

type banner struct {
	proxy, control, admin, upstream string
	brokerAPI                       string
	upPort                          int
	secrets, secretFP, kid          string
	evidence, invoke                string
	controlToken, clientFlags       string
	status                          []host.Status
	intercept                       bool // the proxy intercepts CONNECT
	mcp                             bool // host.mcp is enabled
}

func printBanner(out io.Writer, b banner) {
	var plugins, try strings.Builder
	cli, pflags := b.invoke+" invoke", ""
	if b.clientFlags != "" {
		cli += " " + b.clientFlags
		pflags = " " + b.clientFlags
	}
	control := b.control
	if !strings.HasPrefix(control, "unix:") {
		control = "http://" + control
	}
	mcpLine := ""
	if b.mcp {
		mcpLine = fmt.Sprintf("  MCP endpoint     %s%s   (streamable HTTP, the control API's credentials; docs/mcp.md)\n", control, hostmcp.Path)
	}
	for _, s := range b.status {
		fmt.Fprintf(&plugins, "  %-16s %-9s %-10s", s.Name, s.Kind, s.State)
		if s.Pid != 0 {
			fmt.Fprintf(&plugins, " pid %d", s.Pid)
		}
		if s.LastFailure != "" {
			fmt.Fprintf(&plugins, " (%s)", s.LastFailure)
		}
		plugins.WriteString("\n")
		switch s.Name {
		case DemoPlugin:
			fmt.Fprintf(&try, "  %s %s numinance.ports.tickets.v1.Tickets/ListTickets '{\"project\":\"demo\"}'\n", cli, DemoPlugin)
		case DemoExecutaPlugin:
			fmt.Fprintf(&try, "  %s %s summarize '{\"base_url\":\"http://%s:%d\"}'\n", cli, DemoExecutaPlugin, b.upstream, b.upPort)
			if b.intercept {
				fmt.Fprintf(&try, "  %s %s summarize '{\"base_url\":\"https://%s:%d\"}'   (https://: CONNECT interception)\n",
					cli, DemoExecutaPlugin, b.upstream, b.upPort)
			}
		}
	}
	fmt.Fprintf(out, `
airlock dev is running:
  egress proxy     http://%s   (plugins get HTTP_PROXY pointing here)
  control API      %s   (POST /v1/invocations, GET /v1/plugins)
  control token    %s   (every control API request presents it)
%s  admin            http://%s   (/readyz, /metrics, JWKS)
  broker API       unix:%s   (airlock handle, airlock explain)
  demo upstream    https://%s:%d   (local TLS, trusted through upstream_ca_file)
  demo secret      in %s, sha256 %s (only the proxy and the upstream see it)
  signing key      %s
  evidence         %s

Plugins:
%s
Try a credentialed call end to end, in another terminal:

%s  %s plugins%s

Ctrl-C stops everything.

`, b.proxy, control, b.controlToken, mcpLine, b.admin, b.brokerAPI, b.upstream, b.upPort, b.secrets, b.secretFP, b.kid, b.evidence, plugins.String(), try.String(), b.invoke, pflags)
}
