package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/executa"
	hostmcp "github.com/airlock-dev/airlock/host/mcp"
	"github.com/airlock-dev/airlock/host/pluginv1"
	hostpolicy "github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/admin"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/handoff"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/serve"
	"github.com/airlock-dev/airlock/internal/tracing"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/tokens"
)

// Ports is a new set of the port files compiled into this host (the
// sample tickets port); the installed ones are added to it at start
// (pluginv1.LoadPorts) and while the host runs. They, not a provider's
// copies, govern every call.
func Ports() *host.PortSet {
	return host.NewPortSet(ticketsv1.File_numinance_ports_tickets_v1_tickets_proto)
}

// HostShutdownTimeout bounds how long a host waits for its plugins to stop
// after its context ends (each plugin also has its own grace).
const HostShutdownTimeout = 30 * time.Second

// Host runs `airlock host` until ctx ends: the installed plugin/v1
// providers and the configured Executa plugins under one supervisor, the
// control API, and the host admin listener — beside an `airlock serve`
// reached over the broker socket. A plugin that fails is marked failed
// and the others keep serving; Host returns an error only when its config,
// a listener, the broker or the evidence log fails. opts.Reload rereads
// the config file's host.policy and swaps the policy in.
func Host(ctx context.Context, cfg *config.Config, opts Options) error {
	opts = opts.withDefaults()
	// One host per state directory: a second one would launch every
	// installed plugin again, even with an evidence log of its own.
	lock, err := host.LockStateDir(cfg.StateDir)
	if err != nil {
		return err
	}
	defer lock.Release()
	bc, err := brokerapi.Dial("unix://"+strings.TrimPrefix(cfg.Host.Broker, "unix:"), brokerapi.DialOptions{TokenFile: cfg.Broker.API.TokenFile})
	if err != nil {
		return err
	}
	defer bc.Close()
	if _, err := bc.Status(ctx); err != nil {
		if errors.Is(err, broker.ErrUnauthenticated) {
			return fmt.Errorf("broker at %s: %w (the host presents broker.api.token_file %s)", cfg.Host.Broker, err, cfg.Broker.API.TokenFile)
		}
		if why := peerauth.Refusal(strings.TrimPrefix(cfg.Host.Broker, "unix:")); why != "" {
			return fmt.Errorf("broker at %s refused this user: %s", cfg.Host.Broker, why)
		}
		return fmt.Errorf("broker at %s: %w (is airlock serve running?)", cfg.Host.Broker, err)
	}
	verifyKeys := &tokens.JWKSClient{URL: cfg.Host.Executa.JWKS, HTTPClient: &http.Client{Timeout: 10 * time.Second}}
	deps := hostDeps{broker: bc, tokens: bc, keys: verifyKeys, egressProxy: cfg.Broker.EgressProxy}
	if give := handoffTo(cfg, opts.Log); give != nil {
		kept := &keptListeners{give: give, by: map[string]*handoff.Kept{}}
		deps.proxyServe, deps.egress = kept.serve, kept.state
	}
	n, err := startHost(ctx, cfg, opts, deps)
	if err != nil {
		return err
	}
	n.reloadOn(opts.Reload, cfg)
	if opts.OnReady != nil {
		opts.OnReady(Ready{Control: n.control})
	}
	return n.wait()
}

// hostDeps is what a host gets from the Serve it runs beside.
type hostDeps struct {
	broker      broker.API
	tokens      broker.TokenMinter
	keys        tokens.KeyResolver
	secrets     secretReader // the raw-credential opt-in; none when nil
	egressProxy string
	// proxyServe hands the egress proxy a sandboxed plugin's listener
	// (host.Options.ProxyServe); relayed when nil.
	proxyServe func(plugin string, l net.Listener) (io.Closer, error)
	// egress says whether serve holds a plugin's listener now
	// (host.Options.Egress); unknown when nil.
	egress func(plugin string) (up, known bool)
	// admin, when set, is the listener the host registers its checks on
	// (Dev shares Serve's); else the host serves its own on host.admin.
	admin    *admin.Server
	registry prometheus.Registerer
	// policy and evidence override the config's (Dev).
	policy      *hostpolicy.Policy
	evidence    *evidence.Log
	evidenceKey *evidence.Key
	// tracing is Serve's (Dev); else the host starts its own.
	tracing *tracing.Tracing
}

// handoffTo hands sandboxed plugins' proxy listeners to the airlock serve
// beside this host, whose proxy is the plugins' egress proxy when that is
// a loopback address; nil (relay) otherwise or without the broker token.
func handoffTo(cfg *config.Config, log *slog.Logger) func(string, net.Listener) (*handoff.Kept, error) {
	host, _, err := net.SplitHostPort(cfg.Broker.EgressProxy)
	if ip, perr := netip.ParseAddr(host); err != nil || perr != nil || !ip.IsLoopback() {
		return nil
	}
	tok, err := peerauth.ReadToken("broker.api.token_file", cfg.Broker.API.TokenFile)
	if err != nil {
		log.Warn("sandboxed plugins reach the proxy through a relay: the broker token cannot be read", "err", err)
		return nil
	}
	socket := handoff.Path(strings.TrimPrefix(cfg.Host.Broker, "unix:"))
	// Kept, not only given: the port stays the plugin's, and the
	// listener goes over again after serve restarts.
	return func(plugin string, l net.Listener) (*handoff.Kept, error) {
		return handoff.Keep(socket, tok, plugin, l, log)
	}
}

// keptListeners are the plugins' listeners kept handed over to serve, by
// plugin, so that the host can say whose egress is down.
type keptListeners struct {
	give func(string, net.Listener) (*handoff.Kept, error)
	mu   sync.Mutex
	by   map[string]*handoff.Kept // the running process's, per plugin
}

func (k *keptListeners) serve(plugin string, l net.Listener) (io.Closer, error) {
	kept, err := k.give(plugin, l)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.by[plugin] = kept
	k.mu.Unlock()
	return closerFunc(func() error {
		k.mu.Lock()
		if k.by[plugin] == kept {
			delete(k.by, plugin)
		}
		k.mu.Unlock()
		return kept.Close()
	}), nil
}

func (k *keptListeners) state(plugin string) (up, known bool) {
	k.mu.Lock()
	kept := k.by[plugin]
	k.mu.Unlock()
	if kept == nil {
		return false, false
	}
	return kept.Serving(), true
}

// hostNode is a running host.
type hostNode struct {
	log     *slog.Logger
	h       *host.Host
	control string
	// controlAuth is how the control API names its callers; a reload
	// swaps host.control_principals in (reloadControlPrincipals).
	controlAuth *control.Auth
	// controlAddr is the control API's listening address.
	controlAddr net.Addr
	// ev is the evidence log, reopened on SIGHUP (after logrotate
	// renamed it).
	ev *evidence.Log
	// mcp is the MCP server, when host.mcp is enabled.
	mcp *hostmcp.Server
	// tracing makes the control API's spans; nil: off (tracing.go).
	tracing *tracing.Tracing
	*node
}

// startHost wires a host in named steps: evidence, policy, metrics, the
// host itself, its plugins, the control API and the admin checks.
func startHost(ctx context.Context, cfg *config.Config, opts Options, deps hostDeps) (_ *hostNode, err error) {
	log := opts.Log
	n := &hostNode{log: log, node: newNode(ctx)}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	ev, evKey, err := n.openEvidence(cfg, deps)
	if err != nil {
		return nil, err
	}
	n.ev = ev
	policy, err := hostPolicy(cfg, deps, log)
	if err != nil {
		return nil, err
	}
	reg, ownRegistry := hostRegistry(deps)
	if err := n.startHostTracing(cfg, deps, reg, opts.Version); err != nil {
		return nil, err
	}
	hopts, err := hostOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	hopts.Broker, hopts.Evidence, hopts.EvidenceKey, hopts.Policy = deps.broker, ev, evKey, policy
	hopts.Ledger = ledgerOf(deps.broker)
	hopts.EgressProxy, hopts.ProxyServe, hopts.Egress, hopts.Registerer = deps.egressProxy, deps.proxyServe, deps.egress, reg
	if n.tracing != nil {
		hopts.Tracer = n.tracing.Tracer("github.com/airlock-dev/airlock/host")
	}
	h := host.New(hopts)
	n.h = h
	ctl := control.NewHandler(h)
	ctl.SetWriteTimeout(cfg.Host.ControlWriteTimeout)
	wireDecision(ctl, h, cfg, hopts.Ledger)
	if deps.evidence == nil {
		// The running host owns the evidence log: installs go through it.
		ctl.EnableInstall(&pluginv1.Installer{Host: h, PluginsDir: cfg.Host.PluginsDir, Lockfile: cfg.Host.Lockfile})
	}
	record := func(typ string, data map[string]any) { _, _ = hopts.Record("", typ, "", data) } // a failure is logged
	for port, why := range hopts.Ports.Refused() {
		record("lifecycle.port_refused", map[string]any{"port": port, "reason": why})
	}
	ctl.EnablePorts(&pluginv1.PortInstaller{Ports: hopts.Ports, PortsDir: pluginv1.PortsDir(cfg.StateDir), Lockfile: cfg.Host.Lockfile, Record: record,
		OnChange: h.PortsChanged})
	// Shut the plugins down first, then the services they use.
	n.closers = append(n.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), HostShutdownTimeout)
		defer cancel()
		h.Shutdown(sctx)
	})
	if err := n.startPlugins(cfg, deps); err != nil {
		return nil, err
	}
	// Readiness first: once the control API answers, a caller that saw
	// the plugins running there may ask /readyz at once.
	if err := n.serveAdminChecks(cfg, deps.admin, ownRegistry); err != nil {
		return nil, err
	}
	if err := n.serveControl(cfg, n.withMCP(cfg, ctl, opts.Version)); err != nil {
		return nil, err
	}
	log.Info("airlock host running", "plugins", h.Names(), "control", n.control, "broker", cfg.Host.Broker)
	return n, nil
}

// openEvidence opens the evidence log and its key (or takes Dev's), and
// writes a signed checkpoint every interval and a last one once the
// plugins are down.
func (n *hostNode) openEvidence(cfg *config.Config, deps hostDeps) (ev *evidence.Log, evKey *evidence.Key, err error) {
	log := n.log
	ev = deps.evidence
	if ev == nil {
		if ev, err = evidence.Open(cfg.Host.Evidence); err != nil {
			return nil, nil, err
		}
		n.closers = append(n.closers, func() { ev.Close() })
		if prev := ev.Follows(); prev != "" {
			log.Info("the evidence log's file was rotated before its first record; it goes on from the rotated segment",
				"path", cfg.Host.Evidence, "segment", prev)
		}
	}
	if cfg.Host.EvidenceFailOpen {
		ev.FailOpen = true
		log.Warn("host.evidence_fail_open is set: a call whose evidence record cannot be written proceeds unrecorded")
	}
	evKey = deps.evidenceKey
	if evKey == nil {
		if evKey, err = evidence.LoadKey(cfg.Host.EvidenceKey); err != nil {
			return nil, nil, err
		}
	}
	// This closer runs before the log's.
	n.closers = append(n.closers, func() {
		if _, err := ev.Checkpoint(evKey); err != nil {
			log.Error("evidence checkpoint at shutdown", "err", err)
		}
	})
	n.goRun(func(ctx context.Context) {
		serve.Every(ctx, cfg.Host.CheckpointInterval, func(time.Time) {
			if _, err := ev.Checkpoint(evKey); err != nil {
				log.Error("evidence checkpoint", "err", err)
			}
		})
	})
	return ev, evKey, nil
}

// hostPolicy is Dev's policy, else the configured one; none denies all.
func hostPolicy(cfg *config.Config, deps hostDeps, log *slog.Logger) (*hostpolicy.Policy, error) {
	policy := deps.policy
	if policy == nil && cfg.Host.Policy != "" {
		var err error
		if policy, err = hostpolicy.Load(cfg.Host.Policy); err != nil {
			return nil, err
		}
	}
	if policy == nil {
		log.Warn("no host.policy: every action will be denied")
	}
	return policy, nil
}

// hostRegistry is where the host's metrics go: Serve's registry beside
// Serve's admin listener (Dev), else one of its own, returned as own.
func hostRegistry(deps hostDeps) (reg prometheus.Registerer, own *prometheus.Registry) {
	if deps.admin != nil {
		return deps.registry, nil
	}
	own = prometheus.NewRegistry()
	own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	_ = peerauth.RegisterMetrics(own) // a fresh registry: nothing to clash with
	return own, own
}

// startPlugins starts every installed provider and configured Executa
// plugin concurrently; one that fails is marked and reported, never
// fatal.
func (n *hostNode) startPlugins(cfg *config.Config, deps hostDeps) error {
	h, log := n.h, n.log
	lf, err := pluginv1.ReadLockfile(cfg.Host.Lockfile)
	if err != nil {
		return err
	}
	if len(lf.Plugins) == 0 && len(cfg.Host.Executa.Plugins) == 0 {
		log.Warn("no plugins installed; use airlock host install DIR")
	}
	xs, err := startExecutaServices(n.ctx, cfg, deps, log)
	if err != nil {
		return err
	}
	n.closers = append([]func(){xs.close}, n.closers...) // after the plugins are down

	var starts sync.WaitGroup
	for name := range lf.Plugins {
		starts.Add(1)
		go func() {
			defer starts.Done()
			if err := pluginv1.AddInstalled(h, name, cfg.Host.Lockfile); err != nil {
				log.Error("plugin did not start; the host serves the others", "plugin", name, "kind", host.KindPluginV1, "reason", err.Error())
			}
		}()
	}
	for _, pc := range cfg.Host.Executa.Plugins {
		starts.Add(1)
		go func() {
			defer starts.Done()
			if err := executa.Add(h, pc, xs.opts); err != nil {
				log.Error("plugin did not start; the host serves the others", "plugin", pc.Name, "kind", host.KindExecuta, "reason", err.Error())
			}
		}()
	}
	starts.Wait()
	return nil
}

// serveControl serves the control API on host.control.
func (n *hostNode) serveControl(cfg *config.Config, ctl http.Handler) error {
	h := n.h
	l, handler, auth, err := listenControlAuth(cfg.Host, ctl, n.log)
	if err != nil {
		return fmt.Errorf("host.control: %w", err)
	}
	n.controlAuth, n.controlAddr = auth, l.Addr()
	n.control = l.Addr().String()
	if l.Addr().Network() == "unix" {
		n.control = "unix:" + n.control
	}
	srv := controlServer(traceControl(n.tracing, handler))
	if m := n.mcp; m != nil {
		// MCP sessions hold streams open: end them, or the graceful
		// shutdown waits for them.
		srv.RegisterOnShutdown(func() { _ = m.Close() })
	}
	n.serve("control API", func(ctx context.Context) error {
		// The plugins' shutdown cancels the calls in flight, so the
		// server's graceful shutdown does not wait out their deadlines.
		shutDown := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(shutDown)
			sctx, cancel := context.WithTimeout(context.Background(), HostShutdownTimeout)
			defer cancel()
			h.Shutdown(sctx)
		})
		err := serve.HTTP(ctx, srv, l)
		if !stop() {
			<-shutDown // it ran: the goroutine AfterFunc started ends before this one
		}
		return err
	})
	return nil
}

// serveAdminChecks adds the plugins' readiness check to Serve's admin
// listener (Dev), or serves the host's own on host.admin.
func (n *hostNode) serveAdminChecks(cfg *config.Config, adm *admin.Server, own *prometheus.Registry) error {
	h := n.h
	if adm == nil {
		adm = admin.New(own, n.log)
		al, err := net.Listen("tcp", cfg.Host.Admin)
		if err != nil {
			return fmt.Errorf("host.admin: %w", err)
		}
		n.serve("host admin listener", func(ctx context.Context) error { return adm.Serve(ctx, al) })
	}
	adm.AddCheck("plugins", func(context.Context) error {
		if d := h.Degraded(); len(d) > 0 {
			return &admin.NotReady{What: "plugins not serving", Items: d}
		}
		return nil
	})
	return nil
}

// Install runs `airlock host install DIR`: review the package, launch it
// once to check its handshake, record it in the lockfile. When an airlock
// host is running (it holds the evidence log), the install goes through
// its control API and the plugin starts at once; remote reports that.
func Install(ctx context.Context, cfg *config.Config, dir string, opts Options) (res pluginv1.InstallResult, remote bool, err error) {
	opts = opts.withDefaults()
	hopts, err := hostOptions(cfg, opts.Log)
	if err != nil {
		return res, false, err
	}
	// A running host (it holds the state directory, or the evidence log)
	// installs itself.
	viaHost := func(running error) (pluginv1.InstallResult, bool, error) {
		res, err := installRemote(ctx, cfg.Host.Control, ControlClientOptions{TokenFile: cfg.Host.ControlTokenFile}, dir, running)
		return res, true, err
	}
	lock, err := host.LockStateDir(cfg.StateDir)
	if errors.Is(err, host.ErrStateDirInUse) {
		return viaHost(err)
	}
	if err != nil {
		return res, false, err
	}
	defer lock.Release()
	ev, err := evidence.Open(cfg.Host.Evidence)
	if errors.Is(err, evidence.ErrInUse) {
		return viaHost(err)
	}
	if err != nil {
		return res, false, err
	}
	defer ev.Close()
	hopts.Evidence = ev
	e, name, err := pluginv1.Install(ctx, dir, cfg.Host.PluginsDir, cfg.Host.Lockfile, hopts)
	if err != nil {
		return res, false, err
	}
	return pluginv1.InstallResult{Name: name, ProtocolVersion: e.ProtocolVersion, BinarySHA256: e.BinarySHA256,
		ManifestSHA256: e.ManifestSHA256}, false, nil
}
