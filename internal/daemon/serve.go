package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/admin"
	"github.com/airlock-dev/airlock/internal/auditlog"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/handoff"
	"github.com/airlock-dev/airlock/internal/health"
	"github.com/airlock-dev/airlock/internal/peerauth"
	"github.com/airlock-dev/airlock/internal/tracing"
	"github.com/airlock-dev/airlock/internal/vault"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

// VaultReadyTTL is how long a Vault readiness probe's answer is reused.
// With admin.DefaultCheckTimeout (1 s) for a probe that gets no answer,
// /readyz reports a sealed or stalled Vault within 2 s.
const VaultReadyTTL = time.Second

// Options are what every entry point takes besides its config.
type Options struct {
	// Log is the process logger (discarded when nil).
	Log *slog.Logger
	// Version is reported in airlock_build_info and the broker API.
	Version string
	// OnReady, when set, is called once every listener is up.
	OnReady func(Ready)
	// Stdout is where Dev prints its banner and evidence (discarded when
	// nil).
	Stdout io.Writer
	// AuditOut, when set, takes the proxy's audit lines (one JSON line per
	// request, the fields of the log line they replace) from a writer off
	// the request path, instead of Log. Its writes are whole batches of
	// lines: share it with Log only through one *os.File or a lock.
	AuditOut io.Writer
	// Pprof adds Go's profiling endpoints to the admin listener
	// (diagnostics; off by default).
	Pprof bool
	// Reload, when set, delivers the operator's reload requests
	// (cmd/airlock feeds it SIGHUP; signal handlers are the process's, so
	// main owns them). Serve invalidates the secret cache and reloads
	// the config file (see reload.go); Host reloads its policy; Dev
	// invalidates the secret cache. None of them ever exits for one.
	Reload <-chan os.Signal
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

// Ready names the listeners an entry point serves on.
type Ready struct {
	Admin   string // admin listener host:port
	Proxy   string // egress proxy host:port
	Control string // host control API (host:port or unix:/path)
}

// Serve runs `airlock serve` until ctx ends: broker, egress proxy, token
// issuer, broker API and admin listener. opts.Reload refreshes secrets
// and reloads the config file's intents and rates.
func Serve(ctx context.Context, cfg *config.Config, opts Options) error {
	n, err := startServe(ctx, cfg, opts, serveParts{brokerAPI: true, reload: true})
	if err != nil {
		return err
	}
	if opts.OnReady != nil {
		opts.OnReady(Ready{Admin: n.adminAddr, Proxy: n.proxyAddr})
	}
	return n.wait()
}

// serveParts selects what startServe runs.
type serveParts struct {
	brokerAPI bool
	// proxyConfig, when set, adjusts the proxy config (Dev pins the demo
	// upstream).
	proxyConfig func(*proxy.Config)
	// secrets, when set, replace the config's secret sources of the same
	// name (Dev serves its demo secret beside the user's file).
	secrets map[string]broker.SecretSource
	// reload: a reload request rereads the config file too, not only the
	// secrets (Serve; Dev's config is the file's plus the demo's).
	reload bool
}

// serveNode is a running Serve.
type serveNode struct {
	cfg       *config.Config
	log       *slog.Logger
	broker    *broker.Broker
	ring      *tokens.Ring
	issuer    *tokens.Issuer
	registry  *prometheus.Registry
	admin     *admin.Server
	adminL    net.Listener
	adminAddr string
	proxyAddr string
	proxy     *proxy.Server
	tracing   *tracing.Tracing // nil: off
	*node
}

// serveSandbox serves plugin's own proxy listener on this process's proxy
// (airlock dev: no relay hop, and the proxy knows whose connections they
// are) until the Closer closes.
func (n *serveNode) serveSandbox(plugin string, l net.Listener) (io.Closer, error) {
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{})
	go func() { _ = n.proxy.ServeSandbox(ctx, plugin, l); close(done) }()
	return closerFunc(func() error { cancel(); <-done; return nil }), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// startServe wires a Serve in named steps: keys, metrics, broker, admin
// checks, secret refresh, proxy, broker API and listeners.
func startServe(ctx context.Context, cfg *config.Config, opts Options, parts serveParts) (_ *serveNode, err error) {
	opts = opts.withDefaults()
	log := opts.Log
	n := &serveNode{cfg: cfg, log: log, node: newNode(ctx)}
	n.closers = append(n.closers, func() { log.Info("airlock stopped") })
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	vc, err := n.startKeys(cfg)
	if err != nil {
		return nil, err
	}
	reg := n.newRegistry(opts.Version)
	if err := n.startTracing(cfg, opts.Version); err != nil {
		return nil, err
	}
	b, runBroker, closeBroker, err := newBroker(cfg, vc, reg, log, parts.secrets)
	if err != nil {
		return nil, err
	}
	n.broker = b
	n.closers = append(n.closers, closeBroker)
	n.goRun(runBroker)
	n.addAdmin(vc)
	if opts.Pprof {
		mountPprof(n.admin)
	}
	pc, err := n.startProxy(cfg, parts, vc, opts.AuditOut)
	if err != nil {
		return nil, err
	}
	if parts.brokerAPI {
		api := &brokerapi.Service{Broker: b, Tokens: n.issuer, Ring: n.ring, StoreType: cfg.Broker.Store.Type,
			Version: opts.Version, Log: log, Explainer: n.proxy}
		if n.tracing != nil {
			api.Tracer = n.tracing.Tracer("github.com/airlock-dev/airlock/broker/api")
		}
		stopAPI, err := serveAPI(cfg.Broker.API, api, n.proxy, log)
		if err != nil {
			return nil, err
		}
		n.closers = append(n.closers, stopAPI)
	}
	if err := n.listen(cfg, pc); err != nil {
		return nil, err
	}
	// Once every part a reload swaps into is there.
	n.reloadOn(opts.Reload, parts.reload)
	return n, nil
}

// startKeys connects to Vault (nil when unused) and starts the token
// signing key ring and the issuer on it. Vault down is no reason to
// exit: the login and the keys are retried until they succeed, and
// /readyz says vault and signing_key until then (see startVault,
// loadKeys).
func (n *serveNode) startKeys(cfg *config.Config) (*vault.Client, error) {
	vc, err := startVault(n.ctx, cfg, n.log)
	if err != nil {
		return nil, err
	}
	if vc != nil {
		n.goRun(vc.Run)
	}
	if n.ring, err = NewRing(n.ctx, cfg, vc, n.log); err != nil {
		if cfg.Tokens.Keys.Source != tokens.SourceVault {
			return nil, err
		}
		n.log.Warn("signing keys cannot be read from Vault; starting without a key and retrying (not ready until they load)", "err", err.Error())
		if n.ring, err = newPendingRing(cfg, vc, n.log); err != nil {
			return nil, err
		}
		n.goRun(n.loadKeys)
	}
	n.goRun(func(ctx context.Context) { n.ring.Run(ctx, cfg.Tokens.Refresh) })
	n.issuer = NewIssuer(cfg, n.ring)
	return vc, nil
}

// Retries of the signing keys while Vault cannot be read: the first after
// keyRetryFirst, doubling up to keyRetryMax.
const (
	keyRetryFirst = time.Second
	keyRetryMax   = 30 * time.Second
)

// loadKeys retries loading (or, from an empty source, creating) the
// signing keys of a ring that started without them, until it holds one.
func (n *serveNode) loadKeys(ctx context.Context) {
	wait := keyRetryFirst
	for n.ring.Active() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := n.ring.RotateIfDue(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("signing keys still cannot be read; retrying", "err", err.Error(), "in", wait)
			wait = min(2*wait, keyRetryMax)
		}
	}
	n.log.Info("signing keys loaded; serve can mint and verify tokens", "kid", n.ring.Active().ID)
}

// newRegistry is the process's metrics: Go and process collectors, build
// info and the signing keys'.
func (n *serveNode) newRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	n.registry = reg
	ring := n.ring
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	_ = peerauth.RegisterMetrics(reg) // a fresh registry: nothing to clash with
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_build_info", Help: "Build information.", ConstLabels: prometheus.Labels{"version": version},
	}, func() float64 { return 1 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_token_signing_keys", Help: "Signing keys that may verify now (active plus retired within retention).",
	}, func() float64 { return float64(len(ring.Keys())) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_token_signing_key_age_seconds", Help: "Age of the active token signing key.",
	}, func() float64 {
		if k := ring.Active(); k != nil {
			return time.Since(k.Created).Seconds()
		}
		return 0
	}))
	return reg
}

// addAdmin builds the admin listener's handlers and readiness checks:
// JWKS, secret refresh, signing key, handle store and Vault.
func (n *serveNode) addAdmin(vc *vault.Client) {
	b, ring, reg := n.broker, n.ring, n.registry
	n.admin = admin.New(reg, n.log)
	n.admin.Handle("GET "+tokens.JWKSPath, tokens.JWKSHandler(ring))
	n.admin.Handle("POST /v1/secrets/refresh", refreshHandler(b))
	n.admin.AddCheck("signing_key", func(context.Context) error {
		if ring.Active() == nil {
			return tokens.ErrNoActiveKey
		}
		return nil
	})
	// Not ready while the key source cannot be reread (a key file another
	// user rewrote): this process signs on, but a restart would fail.
	addReloadCheck(n.admin, reg, "signing_keys", ring.Reload())
	// Not cached: a ping is cheap, and a reused answer hid short Redis
	// outages from /readyz.
	storeCheck := admin.Check(b.Ping)
	n.admin.AddCheck("handle_store", storeCheck)
	// Not ready while a revocation is owed: refused here, but another
	// replica may serve it until it lands.
	n.admin.AddCheck("revocations_owed", b.CheckOwed)
	if l := b.Leases(); l != nil {
		// Not ready while lease revocations keep failing (see
		// broker.leases.failing_warning).
		n.admin.AddCheck("leases", l.Check)
	}
	reg.MustRegister(upGauge("airlock_handle_store_up", "1 when the handle store (memory or Redis) answers.", storeCheck))
	if vc != nil {
		// The token is valid and Vault answers (unsealed): probed at most
		// every VaultReadyTTL.
		vaultCheck := admin.Cached(VaultReadyTTL, func(ctx context.Context) error {
			_, err := vc.API.Auth().Token().LookupSelfWithContext(ctx)
			return err
		})
		n.admin.AddCheck("vault", vaultCheck)
		reg.MustRegister(upGauge("airlock_vault_up", "1 when Vault answers and Airlock's token is valid.", vaultCheck))
	}
}

// addReloadCheck makes a periodic reload of key a readiness check and a
// count of failures (airlock_key_reload_failures_total{key}).
func addReloadCheck(a *admin.Server, reg *prometheus.Registry, key string, r *health.Reload) {
	a.AddCheck(key+"_reload", r.Check)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "airlock_key_reload_failures_total",
		Help:        "Failed rereads of a key source (signing keys, intercept CA); the process keeps the keys it holds and is not ready until a reread succeeds.",
		ConstLabels: prometheus.Labels{"key": key},
	}, r.Failures))
}

// startProxy builds the egress proxy over the broker; it returns the
// proxy config as adjusted by parts.
func (n *serveNode) startProxy(cfg *config.Config, parts serveParts, vc *vault.Client, auditOut io.Writer) (proxy.Config, error) {
	pc := cfg.Proxy
	if parts.proxyConfig != nil {
		parts.proxyConfig(&pc)
	}
	popts := proxy.Options{Logger: n.log, Audit: n.log.With("log", "audit"), Registerer: n.registry, Tracing: n.tracing}
	if auditOut != nil {
		// Closed after the proxy and the hand-over listeners stop (closers
		// run in reverse), so that every request's line is written.
		aw := auditlog.New(auditOut, auditlog.Options{Log: n.log, Registerer: n.registry})
		popts.AuditSink = aw
		n.closers = append(n.closers, func() { _ = aw.Close() })
	}
	if gl, ok := n.broker.Store().(proxy.GlobalLimiter); ok {
		popts.GlobalLimits = gl
	}
	if vc != nil {
		popts.Vault = vc.API
	}
	px, err := proxy.New(pc, n.broker, popts)
	if err != nil {
		return pc, err
	}
	n.proxy = px
	if pc.Intercept.CAFile != "" { // the proxy intercepts CONNECT
		// Not ready while a CA kept in Vault could not be loaded yet.
		n.admin.AddCheck("intercept_ca", func(context.Context) error { return px.InterceptReady() })
		addReloadCheck(n.admin, n.registry, "intercept_ca", px.CAReload())
	}
	return pc, nil
}

// listen serves the egress proxy and the admin listener.
func (n *serveNode) listen(cfg *config.Config, pc proxy.Config) error {
	pl, err := net.Listen("tcp", pc.Listen)
	if err != nil {
		return fmt.Errorf("proxy listener: %w", err)
	}
	n.proxyAddr = pl.Addr().String()
	n.serve("egress proxy", func(ctx context.Context) error { return n.proxy.Serve(ctx, pl) })

	if n.adminL, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	n.adminAddr = n.adminL.Addr().String()
	n.proxy.AddSelf(n.adminL.Addr())
	n.log.Info("airlock serving", "admin", n.adminAddr, "jwks", "http://"+n.adminAddr+tokens.JWKSPath,
		"key_source", cfg.Tokens.Keys.Source, "kid", activeKID(n.ring),
		"handle_store", cfg.Broker.Store.Type, "intents", len(cfg.Broker.Intents), "broker_api", cfg.Broker.API.Socket,
		"egress_proxy", n.proxyAddr, "echo_guard", *pc.EchoGuard)
	n.serve("admin listener", func(ctx context.Context) error { return n.admin.Serve(ctx, n.adminL) })
	return nil
}

// refreshHandler invalidates the secret cache, at most once a second so
// the endpoint cannot be used to hammer Vault.
func refreshHandler(b *broker.Broker) http.Handler {
	var mu sync.Mutex
	var last time.Time
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if time.Since(last) < time.Second {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":"rate_limited","detail":"secrets were refreshed less than a second ago"}`+"\n")
			return
		}
		last = time.Now()
		b.RefreshSecrets()
		_, _ = io.WriteString(w, `{"status":"refreshed"}`+"\n")
	})
}

// serveAPI serves the broker gRPC API on the unix socket (and TCP with
// mutual TLS when configured) and returns a function that stops it: it
// returns once every server and every goroutine serveAPI started has
// ended. Every call on either listener presents the token of
// broker.api.token_file, created here when missing.
//
// Beside the broker socket, with the same peers and token, it answers
// hand-overs of sandboxed plugins' proxy listeners (internal/handoff), so
// that an airlock host on this machine sends its plugins' requests to px
// with no relay hop.
func serveAPI(c broker.APIConfig, api *brokerapi.Service, px *proxy.Server, log *slog.Logger) (func(), error) {
	gid, uids, err := c.Peers()
	if err != nil {
		return nil, err
	}
	tok, err := peerauth.EnsureToken("broker.api.token_file", c.TokenFile, gid)
	if err != nil {
		return nil, err
	}
	auth := brokerapi.AuthOptions(tok, log)
	var servers []*grpc.Server
	var serving sync.WaitGroup
	serve := func(g *grpc.Server, l net.Listener) {
		servers = append(servers, g)
		serving.Go(func() { _ = g.Serve(l) })
	}
	stop := func() {
		for _, g := range servers {
			done := make(chan struct{})
			go func() { g.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				g.Stop() // GracefulStop returns once the connections are closed
				<-done
			}
		}
		serving.Wait()
	}
	ul, err := peerauth.ListenUnix(c.Socket, peerauth.UnixOptions{Name: "broker socket", AllowedUIDs: uids, GID: gid, Log: log})
	if err != nil {
		return nil, err
	}
	// Authentication first, so a refused caller never takes a call slot.
	opts := slices.Concat(auth, api.ServerOptions())
	g := grpc.NewServer(opts...)
	api.Register(g)
	serve(g, ul)
	hl, err := peerauth.ListenUnix(handoff.Path(c.Socket),
		peerauth.UnixOptions{Name: "proxy handoff socket", AllowedUIDs: uids, GID: gid, Log: log})
	if err != nil {
		// Hand-overs are a shortcut: without them sandboxed plugins'
		// requests are relayed by their host.
		log.Warn("no proxy handoff socket: sandboxed plugins on this machine reach the proxy through their host's relay", "err", err)
		return stop, nil
	}
	hctx, hcancel := context.WithCancel(context.Background())
	hdone := make(chan struct{})
	go func() { handoff.Serve(hctx, hl, tok, px.ServeSandbox, log); close(hdone) }()
	stopGRPC := stop
	stop = func() { hcancel(); <-hdone; stopGRPC() }
	if c.TCP.Listen != "" {
		creds, err := brokerapi.TCPCredentials(c.TCP)
		if err != nil {
			stop()
			return nil, err
		}
		tl, err := net.Listen("tcp", c.TCP.Listen)
		if err != nil {
			stop()
			return nil, fmt.Errorf("broker API TCP listener: %w", err)
		}
		tg := grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(creds)}, opts...)...)
		api.Register(tg)
		serve(tg, tl)
		log.Info("broker API on TCP with mutual TLS", "listen", tl.Addr().String())
	}
	return stop, nil
}

// upGauge reports a readiness check as 1 or 0 at scrape time.
func upGauge(name, help string, check admin.Check) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if check(ctx) != nil {
			return 0
		}
		return 1
	})
}
