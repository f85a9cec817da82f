package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/pluginv1"
	hostpolicy "github.com/airlock-dev/airlock/host/policy"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/devca"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/proxy"
)

// Names of the demo.
const (
	DemoHost          = "tickets.demo.airlock.test"
	DemoPlugin        = "example.tickets"
	DemoExecutaPlugin = "executa-tickets"
)

// DevOptions are Dev's options besides Options.
type DevOptions struct {
	Options
	// Provider is the sample plugin/v1 provider binary; skipped, with a
	// warning, when the file does not exist.
	Provider string
	// Executa is the sample Executa plugin binary; skipped when the file
	// does not exist.
	Executa string
	// Control, when set, overrides host.control (the control API's listen
	// address).
	Control string
	// Invoke is how the banner spells the airlock binary.
	Invoke string
	// ClientFlags are what the banner's commands need to find this
	// config (for example "--config FILE"); Dev adds --control and
	// --control-token-file when Control overrides the config's.
	ClientFlags string
}

// Dev runs `airlock dev` until ctx ends: a Serve and a Host composed in
// one process on embedded defaults — memory handle store, a generated demo
// secret in a 0600 file, a local TLS demo upstream, the sample provider,
// the sample Executa plugin and every plugin of host.executa — and prints
// how to call them. It works on a copy of cfg: the caller's is left as
// it was.
func Dev(ctx context.Context, cfg *config.Config, opts DevOptions) error {
	cfg = devCopy(cfg)
	opts.Options = opts.Options.withDefaults()
	_, perr := os.Stat(opts.Provider)
	if perr != nil {
		opts.Log.Warn("the sample provider is not there; starting without it (build it with: go build -o "+opts.Provider+
			" ./examples/tickets-provider)", "provider", opts.Provider, "err", perr)
	}
	dir := filepath.Join(cfg.StateDir, "dev")
	// The demo secret, keys and evidence go here: not where another user
	// could plant or read them (host.LockStateDir checks the same).
	for _, d := range []string{cfg.StateDir, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return host.StateDirError(err)
		}
		if err := fsutil.CheckPrivateDir(d); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	demo, err := newDemoSecret(dir, cfg)
	if err != nil {
		return err
	}
	up, err := startDemoUpstream(dir, demo, opts.Stdout)
	if err != nil {
		return err
	}
	defer up.stop()
	if err := devConfig(cfg, dir, demo.file, up.port, opts); err != nil {
		return err
	}
	demoProxy, err := devProxyConfig(cfg.Proxy, dir, up.caFile)
	if err != nil {
		return err
	}
	sn, err := startServe(ctx, cfg, opts.Options, serveParts{brokerAPI: true, secrets: map[string]broker.SecretSource{broker.SourceFile: demo.source},
		proxyConfig: func(pc *proxy.Config) { *pc = demoProxy }})
	if err != nil {
		return err
	}
	defer sn.stop()
	hn, evPath, err := startDevHost(ctx, cfg, dir, opts.Options, sn)
	if err != nil {
		return err
	}
	defer hn.stop()
	if perr == nil {
		inst, err := installDemoProvider(dir, opts.Provider, up.port)
		if err != nil {
			return err
		}
		if err := pluginv1.AddProvider(hn.h, inst); err != nil {
			opts.Log.Error("the sample provider did not start", "reason", err.Error())
		}
	}
	flags := opts.ClientFlags
	if opts.Control != "" {
		flags = strings.TrimSpace(flags + " --control " + hn.control + " --control-token-file " + cfg.Host.ControlTokenFile)
	}
	printBanner(opts.Stdout, banner{proxy: sn.proxyAddr, control: hn.control, controlToken: cfg.Host.ControlTokenFile, clientFlags: flags, admin: sn.adminAddr, brokerAPI: cfg.Broker.API.Socket, upstream: DemoHost, upPort: up.port,
		secrets: demo.file, secretFP: demo.fp, kid: activeKID(sn.ring), evidence: evPath, invoke: opts.Invoke,
		status: hn.h.Status(), intercept: cfg.Proxy.Intercept.CAFile != "", mcp: cfg.Host.MCP.Enabled})
	// Ready once the banner is out: callers (and tests) read it then.
	if opts.OnReady != nil {
		opts.OnReady(Ready{Admin: sn.adminAddr, Proxy: sn.proxyAddr, Control: hn.control})
	}

	select {
	case <-ctx.Done():
	case <-sn.ctx.Done():
	case <-hn.ctx.Done():
	}
	cancel()
	herr := hn.stop()
	serr := sn.stop()
	fmt.Fprintln(opts.Stdout, "airlock dev stopped")
	return errors.Join(herr, serr)
}

// devProxyConfig adds the demo's upstream to the file's proxy settings:
// loopback in allow_cidrs, a pin of the demo host, and the dev CA beside
// the file's upstream_ca_file (both in one bundle under dir). What the
// file sets stays, so a plugin author's own local upstream keeps working.
func devProxyConfig(pc proxy.Config, dir, devCAFile string) (proxy.Config, error) {
	const loopback = "127.0.0.0/8"
	if !slices.Contains(pc.AllowCIDRs, loopback) {
		pc.AllowCIDRs = append(slices.Clip(pc.AllowCIDRs), loopback)
	}
	pins := maps.Clone(pc.Resolve)
	if pins == nil {
		pins = map[string][]string{}
	}
	pins[DemoHost] = []string{"127.0.0.1"}
	pc.Resolve = pins
	if pc.UpstreamCAFile == "" {
		pc.UpstreamCAFile = devCAFile
		return pc, nil
	}
	own, err := os.ReadFile(pc.UpstreamCAFile)
	if err != nil {
		return pc, fmt.Errorf("proxy.upstream_ca_file: %w", err)
	}
	dev, err := os.ReadFile(devCAFile)
	if err != nil {
		return pc, err
	}
	bundle := filepath.Join(dir, "upstream-ca.pem")
	own = append(bytes.TrimRight(own, "\n"), '\n')
	if err := os.WriteFile(bundle, append(own, dev...), 0o600); err != nil {
		return pc, err
	}
	pc.UpstreamCAFile = bundle
	return pc, nil
}

// demoSecret is the dev run's demo secret: generated per run, kept in a
// 0600 file, served beside the user's secrets file.
type demoSecret struct {
	value, fp, file string
	source          broker.SecretSource
}

func newDemoSecret(dir string, cfg *config.Config) (demoSecret, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	d := demoSecret{value: "demo_" + hex.EncodeToString(raw[:]), file: filepath.Join(dir, "secrets.yaml")}
	d.fp = broker.Fingerprint(d.value) // the same 8 bytes of SHA-256 as a handle's
	if err := os.WriteFile(d.file, []byte(demoSecretPath+": {token: "+d.value+"}\n"), 0o600); err != nil {
		return demoSecret{}, err
	}
	// The user's secrets file keeps serving the user's intents.
	src := devSecrets{demo: &broker.FileSource{Path: d.file}}
	if f := cfg.Broker.Secrets.File; f != "" {
		src.user = &broker.FileSource{Path: f}
	}
	d.source = src
	return d, nil
}

// demoUpstreamServer is the local HTTPS ticket API that wants the demo secret,
// with a certificate from the dev run's CA.
type demoUpstreamServer struct {
	port   int
	caFile string
	stop   func()
}

func startDemoUpstream(dir string, demo demoSecret, out io.Writer) (*demoUpstreamServer, error) {
	ca, err := devca.New(dir, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	upCert, err := ca.IssueCert(DemoHost)
	if err != nil {
		return nil, err
	}
	upL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	upSrv := &http.Server{Handler: demoUpstream(demo.value, demo.fp, out), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{upCert}}}
	upDone := make(chan struct{})
	go func() { defer close(upDone); _ = upSrv.ServeTLS(upL, "", "") }()
	return &demoUpstreamServer{port: upL.Addr().(*net.TCPAddr).Port, caFile: ca.PEMFile,
		stop: func() { upSrv.Close(); <-upDone }}, nil
}

// keepDevLog moves the evidence log of the last dev run, if any, aside
// as evidence-<its last write, UTC>.jsonl, so that a new run starts a
// fresh chain without destroying the last one's evidence.
func keepDevLog(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	old := strings.TrimSuffix(path, ".jsonl") + "-" + st.ModTime().UTC().Format("20060102T150405.000000000Z") + ".jsonl"
	if err := os.Rename(path, old); err != nil {
		return fmt.Errorf("keeping the last dev run's evidence log: %w", err)
	}
	return nil
}

// startDevHost starts the host beside sn in this process, with a fresh
// evidence chain printed as it grows, and allow-all unless host.policy
// names a policy.
func startDevHost(ctx context.Context, cfg *config.Config, dir string, opts Options, sn *serveNode) (_ *hostNode, evPath string, err error) {
	evPath = filepath.Join(dir, "evidence.jsonl")
	if err := keepDevLog(evPath); err != nil { // a fresh chain per dev run; the last one kept
		return nil, "", err
	}
	ev, err := evidence.Open(evPath)
	if err != nil {
		return nil, "", err
	}
	out := opts.Stdout
	ev.OnAppend = func(r evidence.Record) {
		fmt.Fprintf(out, "evidence #%d %-22s %s %s\n", r.Seq, r.Type, r.ID, compact(string(r.Data)))
	}
	policy := hostpolicy.AllowAll()
	if cfg.Host.Policy != "" {
		policy = nil // the configured one
	}
	hn, err := startHost(ctx, cfg, opts, hostDeps{broker: sn.broker, tokens: broker.LocalMinter{Issuer: sn.issuer},
		keys: sn.ring, secrets: sn.broker, egressProxy: sn.proxyAddr, proxyServe: sn.serveSandbox, admin: sn.admin, registry: sn.registry,
		policy: policy, evidence: ev, tracing: sn.tracing})
	if err != nil {
		ev.Close()
		return nil, "", err
	}
	// The host's closers run last added first: the log closes after
	// everything else, its last checkpoint included.
	hn.closers = append([]func(){func() { ev.Close() }}, hn.closers...)
	return hn, evPath, nil
}

// devCopy copies what devConfig changes in place: the config, its
// intents and its Executa plugins (everything else it replaces whole).
func devCopy(cfg *config.Config) *config.Config {
	c := *cfg
	c.Broker.Intents = maps.Clone(cfg.Broker.Intents)
	c.Host.Executa.Plugins = slices.Clone(cfg.Host.Executa.Plugins)
	return &c
}

// devConfig turns the loaded config into the dev one: demo intents over
// the file secret, a dev lockfile, the sampling fixture, and the sample
// Executa plugin beside any configured ones.
func devConfig(cfg *config.Config, dir, secrets string, upPort int, opts DevOptions) error {
	ref := broker.SecretRef{Source: broker.SourceFile, Path: demoSecretPath, Field: "token"}
	inj := broker.Inject{Kind: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}
	bc := cfg.Broker
	if bc.Secrets.File == "" {
		// The file source is devSecrets either way; this only says there
		// is one.
		bc.Secrets.File = secrets
	}
	if bc.Intents == nil {
		bc.Intents = map[string]broker.Intent{}
	}
	bc.Intents["tickets.read"] = broker.Intent{Class: broker.ClassRead, Secret: ref, Inject: inj}
	bc.Intents["tickets.write"] = broker.Intent{Class: broker.ClassWrite, Secret: ref, Inject: inj}
	// The Executa sample uses its handle where the key goes; the proxy
	// swaps it (placeholder substitution).
	bc.Intents["tickets.placeholder"] = broker.Intent{Class: broker.ClassRead, Secret: ref,
		Inject:       broker.Inject{Kind: &broker.PlaceholderInject{Headers: []string{"Authorization"}}},
		Destinations: []broker.Destination{{Host: DemoHost, Port: upPort, PathPrefix: "/api/", Methods: []string{"GET"}}}}
	bc = bc.WithDefaults()
	if err := bc.Validate(); err != nil {
		return err
	}
	cfg.Broker = bc
	// CONNECT interception with a CA of the dev run's own, so that
	// https:// clients work too (the sample Executa plugin with an
	// https:// base_url), unless the configuration has its own.
	if ic := &cfg.Proxy.Intercept; ic.CAFile == "" && ic.Vault.Path == "" {
		ic.CAFile, ic.CAKeyFile = filepath.Join(dir, "intercept-ca.pem"), filepath.Join(dir, "intercept-ca.key")
	}
	if opts.Control != "" {
		cfg.Host.Control = opts.Control
		if _, unix := cfg.Host.ControlSocket(); !unix && cfg.Host.ControlTLS == nil && cfg.Host.ControlTokenFile == "" {
			cfg.Host.ControlTokenFile = filepath.Join(dir, config.DefaultControlTokenFile)
		}
		cfg.Host = cfg.Host.WithControlDefaults()
		if err := cfg.Host.Validate(); err != nil {
			return err
		}
	}
	cfg.Host.Lockfile = filepath.Join(dir, "plugins.lock.json")
	xc := &cfg.Host.Executa
	xc.Storage = filepath.Join(dir, "aps.db")
	if xc.Sampling.Fixture == "" && xc.Sampling.OpenAI == nil {
		fixture := filepath.Join(dir, "sampling.jsonl")
		if err := os.WriteFile(fixture, []byte(`{"match":"","text":"Two tickets: rotating the billing API key is open; the plugin manifest review is closed.","model":"airlock-dev-fixture","inputTokens":40,"outputTokens":18}`+"\n"), 0o600); err != nil {
			return err
		}
		xc.Sampling.Fixture = fixture
	}
	taken := slices.ContainsFunc(xc.Plugins, func(p config.ExecutaPlugin) bool { return p.Name == DemoExecutaPlugin })
	if _, err := os.Stat(opts.Executa); err == nil && !taken {
		xc.Plugins = append(xc.Plugins, config.ExecutaPlugin{Name: DemoExecutaPlugin, Command: opts.Executa,
			Credentials: map[string]string{"TICKETS_API_KEY": "tickets.placeholder"}})
	}
	return nil
}

// installDemoProvider lays out the sample provider with a manifest naming
// the demo upstream.
func installDemoProvider(dir, provider string, upPort int) (pluginv1.Installed, error) {
	// As airlock host install lays a package out, whatever the umask: a
	// root host runs the provider as a uid of its own, which must reach
	// and read it (the plugins directory only traversable).
	plugins := filepath.Join(dir, "plugins")
	pkg := filepath.Join(plugins, DemoPlugin)
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return pluginv1.Installed{}, err
	}
	if err := os.Chmod(plugins, 0o711); err != nil {
		return pluginv1.Installed{}, err
	}
	if err := os.Chmod(pkg, 0o755); err != nil {
		return pluginv1.Installed{}, err
	}
	bin := filepath.Join(pkg, "tickets-provider")
	if err := fsutil.CopyFile(provider, bin, 0o755); err != nil {
		return pluginv1.Installed{}, err
	}
	manifest := fmt.Sprintf(`name: %s
version: 0.1.0
spec_version: "1.0"
ports: [numinance.ports.tickets.v1]
credential_intents:
  - {name: tickets.read, class: read, destinations: [{host: %s, port: %d, path_prefix: /api/, methods: [GET]}]}
  - {name: tickets.write, class: write, destinations: [{host: %s, port: %d, path_prefix: /api/, methods: [POST]}]}
evidence_record_types: [tickets.created]
`, DemoPlugin, DemoHost, upPort, DemoHost, upPort)
	if err := fsutil.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte(manifest), 0o644); err != nil {
		return pluginv1.Installed{}, err
	}
	m, err := pluginv1.LoadManifest(filepath.Join(pkg, "manifest.yaml"))
	if err != nil {
		return pluginv1.Installed{}, err
	}
	digest, err := pluginv1.BinaryDigest(bin)
	if err != nil {
		return pluginv1.Installed{}, err
	}
	return pluginv1.Installed{Name: DemoPlugin, Binary: bin, BinarySHA256: digest, Manifest: m, ProtocolVersion: 1}, nil
}

func compact(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
