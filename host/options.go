package host

import (
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/launch"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/sandbox"
)

// Defaults for Options.
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultShutdownGrace    = 5 * time.Second
)

// Options are what a host gives every plugin.
type Options struct {
	Broker   broker.API
	Evidence *evidence.Log
	// EvidenceKey signs the evidence log's checkpoints; its public half is
	// served at GET /v1/evidence/jwks.json.
	EvidenceKey *evidence.Key
	EgressProxy string // host:port, put in HTTP_PROXY
	// InterceptCAFile is the egress proxy's intercept CA certificate
	// (proxy.intercept.ca_file): when set, each plugin gets a copy in its
	// private directory, HTTPS_PROXY and the CA variables (egressenv).
	InterceptCAFile string
	// HTTPSProxyOptOut names plugins (of either kind) that get only
	// HTTP_PROXY: no HTTPS_PROXY, no CA variables, no pass.
	HTTPSProxyOptOut []string
	// Ports are the port files the host serves, compiled and installed,
	// by package name ("numinance.ports.tickets.v1"); they, not the
	// provider's copies, govern every plugin/v1 call, looked up at each
	// call (a port installed while the host runs is served at once); nil
	// serves none. Ports, Artifacts and HandshakeTimeout are read by the
	// plugin/v1 runtime only.
	Ports *PortSet
	// Policy decides every action before it reaches a provider; nil
	// denies everything.
	Policy *policy.Policy
	// Ledger holds access grants, approvals, spend and violations (the
	// broker's handle store, shared by replicas); nil: no grants or
	// approvals, and budgets are not counted.
	Ledger broker.Ledger
	// Decision is the decision point's config (host.decision).
	Decision DecisionConfig
	// Artifacts serves ResolveReference; none when nil.
	Artifacts        Artifacts
	HandshakeTimeout time.Duration
	// ShutdownGrace bounds Shutdown as a whole: the Shutdown RPC and the
	// wait for the exit share it; then the process group is killed.
	ShutdownGrace time.Duration
	// Restart is how a crashed plugin is restarted; HealthInterval how
	// often a running one is probed (zero: DefaultHealthInterval).
	Restart        RestartPolicy
	HealthInterval time.Duration
	// Now is the clock a run's healthy uptime is measured on (the
	// restart budget's reset; nil: time.Now). Tests set one they advance
	// instead of waiting.
	Now func() time.Time
	// StderrLevel is the level of plugin stderr lines (default info);
	// Redactor removes credential-shaped values from them and from
	// HostService.Log fields (nil: the built-in shapes).
	StderrLevel slog.Level
	Redactor    *redact.Redactor
	// Sandbox is how plugins are confined (host.sandbox); Hide are
	// Airlock's own paths no plugin sees (state, config and runtime
	// directories).
	Sandbox SandboxConfig
	Hide    []string
	// ProxyServe, when set, hands the egress proxy each sandboxed
	// plugin's proxy listener to serve directly, with no relay hop, for
	// that plugin (named by plugin): the proxy then refuses any other
	// plugin's handle or pass on it.
	ProxyServe func(plugin string, l net.Listener) (io.Closer, error)
	// Egress, when set, says whether the egress proxy serves a running
	// plugin's proxy listener now (known false: the plugin's listener is
	// not handed to a proxy, it is relayed). A plugin whose egress is
	// down shows egress "unavailable", is not ready (/readyz), and has
	// airlock_plugin_egress_up 0.
	Egress func(plugin string) (up, known bool)
	// QuarantineDir keeps each quarantined plugin's record, so that a
	// quarantine outlives a restart of the host ("" keeps none on disk).
	QuarantineDir string
	// Registerer receives the plugin metrics; none when nil.
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// Tracer makes the invoke path's spans (trace.go); nil: none.
	Tracer trace.Tracer
}

// SandboxConfig is the host.sandbox section: the level, extra read-only
// grants and limits, per plugin.
type SandboxConfig = sandbox.Config

// LaunchOptions are what the launch layer needs of o, for a runtime
// that starts a process.
func (o Options) LaunchOptions(log *slog.Logger) launch.Options {
	return launch.Options{Broker: o.Broker, EgressProxy: o.EgressProxy, InterceptCAFile: o.InterceptCAFile,
		Sandbox: o.Sandbox, Hide: o.Hide, ProxyServe: o.ProxyServe, StderrLevel: o.StderrLevel, Redactor: o.Redactor, Log: log}
}
