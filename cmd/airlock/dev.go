package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/devca"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/serve"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/proxy"
	"github.com/airlock-dev/airlock/tokens"
)

const (
	demoHost   = "tickets.demo.airlock.test"
	demoPlugin = "example.tickets"
)

// cmdDev runs the whole credential path in one process on embedded
// defaults: host, broker (memory store, file secret with a generated demo
// secret), egress proxy, token issuer, a local TLS demo upstream trusted
// through upstream_ca_file, and the sample provider.
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", stderr)
	path := configFlag(fs)
	exe, _ := os.Executable()
	provider := fs.String("provider", filepath.Join(filepath.Dir(exe), "tickets-provider"), "the sample provider binary (make run builds it)")
	executaBin := fs.String("executa", filepath.Join(filepath.Dir(exe), "executa-tickets"), "the sample Executa plugin binary (make run builds it)")
	control := fs.String("control", strings.TrimPrefix(DefaultControl, "http://"), "control API listen address")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	if _, err := os.Stat(*provider); err != nil {
		return fmt.Errorf("sample provider %s: %w (build it with: go build -o %s ./examples/tickets-provider)", *provider, err, *provider)
	}
	dir := filepath.Join(cfg.StateDir, "dev")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A demo secret, generated per run, kept in a 0600 file.
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	secret := "demo_" + hex.EncodeToString(raw[:])
	secretFP := fingerprint(secret)
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/tickets: {token: "+secret+"}\n"), 0o600); err != nil {
		return err
	}

	// The demo upstream: a local HTTPS ticket API that wants the secret.
	ca, err := devca.New(dir, 24*time.Hour)
	if err != nil {
		return err
	}
	upCert, err := ca.IssueCert(demoHost)
	if err != nil {
		return err
	}
	upL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	upSrv := &http.Server{Handler: demoUpstream(secret, secretFP, stdout), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{upCert}}}
	go func() { _ = upSrv.ServeTLS(upL, "", "") }()
	defer upSrv.Close()
	upPort := upL.Addr().(*net.TCPAddr).Port

	// Broker and proxy.
	pxL, err := net.Listen("tcp", cfg.Proxy.Listen)
	if err != nil {
		return fmt.Errorf("proxy listener: %w", err)
	}
	ref := broker.SecretRef{Source: broker.SourceFile, Path: "demo/tickets", Field: "token"}
	inj := broker.Inject{Header: &broker.HeaderInject{Name: "Authorization", Template: "Bearer {{secret}}"}}
	bc := cfg.Broker
	bc.EgressProxy = pxL.Addr().String()
	bc.Secrets.File = secrets
	bc.Intents = map[string]broker.Intent{
		"tickets.read":  {Class: broker.ClassRead, Secret: ref, Inject: inj},
		"tickets.write": {Class: broker.ClassWrite, Secret: ref, Inject: inj},
		// The Executa sample uses its handle where the key goes; the proxy
		// swaps it (placeholder substitution).
		"tickets.placeholder": {Class: broker.ClassRead, Secret: ref,
			Inject:       broker.Inject{Placeholder: &broker.PlaceholderInject{Headers: []string{"Authorization"}}},
			Destinations: []broker.Destination{{Host: demoHost, Port: upPort, PathPrefix: "/api/", Methods: []string{"GET"}}}},
	}
	bc = bc.WithDefaults()
	if err := bc.Validate(); err != nil {
		return err
	}
	cfg.Broker = bc
	b, runBroker, closeBroker, err := newBroker(cfg, nil, nil, log)
	if err != nil {
		return err
	}
	defer closeBroker()
	go runBroker(ctx)
	pc := cfg.Proxy
	pc.AllowCIDRs = append(pc.AllowCIDRs, "127.0.0.0/8")
	pc.UpstreamCAFile = ca.PEMFile
	pc.Resolve = map[string][]string{demoHost: {"127.0.0.1"}}
	if err := pc.Validate(); err != nil {
		return err
	}
	px, err := proxy.New(pc, b, proxy.Options{Logger: log, Audit: log.With("log", "audit")})
	if err != nil {
		return err
	}
	pxDone := make(chan error, 1)
	go func() { pxDone <- px.Serve(ctx, pxL) }()

	// Token issuer (JWKS on the admin listener).
	ring, err := newRing(ctx, cfg, nil, log)
	if err != nil {
		return err
	}

	// The sample provider, installed with a manifest naming the demo upstream.
	pkg := filepath.Join(dir, "plugins", demoPlugin)
	if err := os.MkdirAll(pkg, 0o700); err != nil {
		return err
	}
	bin := filepath.Join(pkg, "tickets-provider")
	if err := fsutil.CopyFile(*provider, bin, 0o700); err != nil {
		return err
	}
	manifest := fmt.Sprintf(`name: %s
version: 0.1.0
spec_version: "1.0"
ports: [numinance.ports.tickets.v1]
credential_intents:
  - {name: tickets.read, class: read, destinations: [{host: %s, port: %d, path_prefix: /api/, methods: [GET]}]}
  - {name: tickets.write, class: write, destinations: [{host: %s, port: %d, path_prefix: /api/, methods: [POST]}]}
evidence_record_types: [tickets.created]
`, demoPlugin, demoHost, upPort, demoHost, upPort)
	if err := os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte(manifest), 0o600); err != nil {
		return err
	}
	m, err := host.LoadManifest(filepath.Join(pkg, "manifest.yaml"))
	if err != nil {
		return err
	}
	digest, err := host.BinaryDigest(bin)
	if err != nil {
		return err
	}
	evPath := filepath.Join(dir, "evidence.jsonl")
	_ = os.Remove(evPath) // a fresh chain per dev run
	ev, err := host.OpenEvidenceLog(evPath)
	if err != nil {
		return err
	}
	defer ev.Close()
	ev.OnAppend = func(r host.Record) {
		fmt.Fprintf(stdout, "evidence #%d %-22s %s %s\n", r.Seq, r.Type, r.ID, compact(r.Data))
	}
	h := host.NewHost()
	p, err := host.Launch(ctx, host.Installed{Name: demoPlugin, Binary: bin, BinarySHA256: digest, Manifest: m, ProtocolVersion: 1},
		host.Options{Broker: b, Evidence: ev, EgressProxy: pxL.Addr().String(), Policy: host.AllowAll(), Log: log,
			Ports: map[string]protoreflect.FileDescriptor{"numinance.ports.tickets.v1": ticketsv1.File_numinance_ports_tickets_v1_tickets_proto}})
	if err != nil {
		return fmt.Errorf("launch the sample provider: %w", err)
	}
	h.Add(p)
	defer h.Shutdown(context.Background())

	// The sample Executa plugin: brokered credential, sampling (fixture
	// backend), APS storage.
	executaCmd := ""
	if _, err := os.Stat(*executaBin); err == nil {
		fixture := filepath.Join(dir, "sampling.jsonl")
		if err := os.WriteFile(fixture, []byte(`{"match":"","text":"Two tickets: rotating the billing API key is open; the plugin manifest review is closed.","model":"airlock-dev-fixture","inputTokens":40,"outputTokens":18}`+"\n"), 0o600); err != nil {
			return err
		}
		backend, err := executa.LoadFixtureBackend(fixture)
		if err != nil {
			return err
		}
		kv, err := executa.OpenKVStore(filepath.Join(dir, "aps.db"))
		if err != nil {
			return err
		}
		defer kv.Close()
		verifier, err := tokens.NewVerifier(ring, tokens.VerifierOptions{Issuer: cfg.Tokens.Issuer})
		if err != nil {
			return err
		}
		sup := executa.NewSupervisor(executa.PluginConfig{Name: "executa-tickets", Command: *executaBin,
			Credentials: map[string]string{"TICKETS_API_KEY": "tickets.placeholder"}},
			executa.Options{Broker: b, Secrets: b, Tokens: broker.LocalMinter{Issuer: newIssuer(cfg, ring)}, Verifier: verifier,
				EgressProxy: pxL.Addr().String(), Sampling: backend, KV: kv, Log: log})
		if _, err := sup.Process(ctx); err != nil {
			return fmt.Errorf("start the sample Executa plugin: %w", err)
		}
		if err := h.AddExecuta("executa-tickets", sup); err != nil {
			sup.Shutdown()
			return err
		}
		executaCmd = fmt.Sprintf("\n  %s invoke executa-tickets summarize '{\"base_url\":\"http://%s:%d\"}'\n", invokeCommand(exe), demoHost, upPort)
	}

	ctlL, err := net.Listen("tcp", *control)
	if err != nil {
		return fmt.Errorf("control listener: %w", err)
	}
	ctlSrv := &http.Server{Handler: h.ControlHandler(), ReadHeaderTimeout: 5 * time.Second}
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- serve.HTTP(ctx, ctlSrv, ctlL) }()

	fmt.Fprintf(stdout, `
airlock dev is running:
  egress proxy     http://%s   (plugins get HTTP_PROXY pointing here)
  control API      http://%s   (POST /v1/invocations)
  demo upstream    https://%s:%d   (local TLS, trusted through upstream_ca_file)
  demo secret      in %s, sha256 %s (only the proxy and the upstream see it)
  signing key      %s
  plugin           %s (pid %s), evidence in %s

Try a credentialed call end to end, in another terminal:

  %s invoke %s numinance.ports.tickets.v1.Tickets/ListTickets '{"project":"demo"}'
%s
Ctrl-C stops everything.

`, pxL.Addr(), ctlL.Addr(), demoHost, upPort, secrets, secretFP, ring.Active().ID, demoPlugin, pidOf(p), evPath, invokeCommand(exe), demoPlugin, executaCmd)

	select {
	case <-ctx.Done():
	case <-p.Exited():
		log.Error("the sample provider exited")
	}
	cancel()
	h.Shutdown(context.Background())
	<-ctlDone
	if err := <-pxDone; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintln(stdout, "airlock dev stopped")
	return nil
}

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

func fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

func compact(b json.RawMessage) string {
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}

func invokeCommand(exe string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return exe
}

func pidOf(p *host.Plugin) string { return strconv.Itoa(p.Pid()) }
