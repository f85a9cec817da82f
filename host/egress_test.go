package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	"github.com/airlock-dev/airlock/internal/egressenv"
	pluginv1 "github.com/airlock-dev/airlock/proto/numinance/plugin/v1"
	ticketsv1 "github.com/airlock-dev/airlock/proto/numinance/ports/tickets/v1"
	"github.com/airlock-dev/airlock/proxy"
)

// The proxy environment a plugin/v1 provider starts with: with the
// intercept CA, a copy of it in the private directory, HTTPS_PROXY with a
// pass for the hosts its manifest declares (and no others), the CA
// variables; a plugin that opted out gets HTTP_PROXY alone.
func TestProviderEgressEnv(t *testing.T) {
	caDir := t.TempDir()
	ca, caKey := filepath.Join(caDir, "ca.pem"), filepath.Join(caDir, "ca.key")
	if _, err := proxy.InterceptCA(context.Background(), proxy.InterceptConfig{CAFile: ca, CAKeyFile: caKey}, nil, proxy.CAStatusAction); err != nil {
		t.Fatal(err)
	}
	bc := broker.Config{Intents: map[string]broker.Intent{}}.WithDefaults()
	b := broker.New(bc, broker.NewMemoryStore(100, time.Minute, time.Hour, nil), nil, broker.Options{})
	inst := Installed{Name: "tickets", Manifest: &pluginv1.Manifest{CredentialIntents: []*pluginv1.CredentialIntent{
		{Name: "a", Class: "read", Destinations: []*pluginv1.Destination{{Host: "api.example.com", PathPrefix: "/v1/"}, {Host: "api.example.com"}}},
		{Name: "b", Class: "write", Destinations: []*pluginv1.Destination{{Host: "up.example.net", Port: 8443}}},
	}}}
	p := &Plugin{inst: inst, opts: Options{Broker: b, EgressProxy: "127.0.0.1:8899", InterceptCAFile: ca}}
	work := t.TempDir()
	env, iss, err := p.egressEnv(context.Background(), work)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	copyPath := filepath.Join(work, egressenv.CAName)
	if vars["SSL_CERT_FILE"] != copyPath || vars["NODE_EXTRA_CA_CERTS"] != copyPath || vars["HTTP_PROXY"] != "http://127.0.0.1:8899" {
		t.Fatalf("env %v", env)
	}
	// The plugin gets the certificate, never the key: not in its
	// directory, not named by its environment.
	entries, _ := os.ReadDir(work)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(work, e.Name()))
		if err != nil || strings.Contains(string(b), "PRIVATE KEY") || !strings.Contains(string(b), "CERTIFICATE") {
			t.Fatalf("%s in the plugin's directory: %v", e.Name(), err)
		}
	}
	if len(entries) != 1 || strings.Contains(strings.Join(env, " "), caKey) {
		t.Fatalf("plugin directory %v, env %v", entries, env)
	}
	pass, ok := strings.CutPrefix(vars["HTTPS_PROXY"], "http://airlock:")
	pass, _, _ = strings.Cut(pass, "@")
	if !ok || !broker.LooksLikeHandle(pass) || pass != iss.Handle {
		t.Fatalf("HTTPS_PROXY %q carries no pass", vars["HTTPS_PROXY"])
	}
	g, err := b.Resolve(context.Background(), pass)
	if err != nil || !g.Pass || g.PluginID != "tickets" {
		t.Fatalf("pass grant %+v, %v", g, err)
	}
	places := []string{}
	for _, d := range g.Destinations {
		places = append(places, d.Host+":"+strconv.Itoa(d.Port))
	}
	if !slices.Equal(places, []string{"api.example.com:443", "up.example.net:8443"}) {
		t.Fatalf("the pass opens tunnels to %v", places)
	}

	p.opts.HTTPSProxyOptOut = []string{"other", "tickets"}
	env, iss, err = p.egressEnv(context.Background(), t.TempDir())
	if err != nil || iss.Handle != "" || !slices.Equal(env, []string{"HTTP_PROXY=http://127.0.0.1:8899", "http_proxy=http://127.0.0.1:8899"}) {
		t.Fatalf("opted out: %v, %v", env, err)
	}
}

// A plugin/v1 provider calls an https:// URL with Go's default client,
// configured only by the host's environment (its pass in HTTPS_PROXY, the
// intercept CA in SSL_CERT_FILE), its handle as the API key — and still
// can past its pass's first expiry, because the host renews the pass.
func TestProviderHTTPSThroughInterception(t *testing.T) {
	const passTTL = 2 * time.Second
	f := newHostFixtureWith(t, passTTL)
	ctx := context.Background()
	p, err := Launch(ctx, f.install(t, badBin, "https"), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	call := func(when string) {
		t.Helper()
		out, err := p.Invoke(ctx, InvokeRequest{Method: "numinance.ports.tickets.v1.Tickets/ListTickets",
			Input: &ticketsv1.ListTicketsRequest{}, Deadline: time.Now().Add(30 * time.Second)})
		if err != nil || len(out.Diagnostics) != 1 || out.Diagnostics[0].Code != "https:200" {
			t.Fatalf("%s: %+v %v", when, out, err)
		}
		if got := <-f.seenAuth; got != "Bearer "+upstreamSecret {
			t.Fatalf("%s: the upstream saw %q", when, got)
		}
	}
	call("first call")
	time.Sleep(passTTL + passTTL/2)
	call("past the pass's first expiry")
}

// A plugin whose pass is lost (here an operator revoked it) fails its next
// health probe and is restarted with a new pass; its https:// calls work
// again.
func TestLostPassRestartsPlugin(t *testing.T) {
	f := newHostFixtureWith(t, 2*time.Second)
	h := newTestHost(t, f, func(o *Options) { o.HealthInterval = 100 * time.Millisecond })
	inst := f.install(t, badBin, "https")
	if err := h.AddProvider(inst); err != nil {
		t.Fatal(err)
	}
	waitState(t, h, inst.Name, "running", func(s Status) bool { return s.State == StateRunning })
	f.b.mu.Lock()
	first := f.b.handles[0] // the pass, minted before the plugin started
	f.b.mu.Unlock()
	key, _ := broker.ParseHandle(first)
	if n, err := f.b.RevokeHandle(context.Background(), key.Fingerprint()); err != nil || n != 1 {
		t.Fatalf("revoking the pass: %d %v", n, err)
	}
	s := waitState(t, h, inst.Name, "restarted", func(s Status) bool { return s.Restarts >= 1 && s.State == StateRunning })
	if !strings.Contains(s.LastFailure, ErrProbeFailed.Error()) {
		t.Fatalf("status after the pass was lost: %+v", s)
	}
	out, err := h.Invoke(context.Background(), inst.Name, InvokeRequest{Method: listTickets,
		Input: &ticketsv1.ListTicketsRequest{}, Deadline: time.Now().Add(20 * time.Second)})
	if err != nil || len(out.Diagnostics) != 1 || out.Diagnostics[0].Code != "https:200" {
		t.Fatalf("after the restart: %+v %v", out, err)
	}
	if got := <-f.seenAuth; got != "Bearer "+upstreamSecret {
		t.Fatalf("the upstream saw %q", got)
	}
}
