package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/peerauth"
)

// host.control_principals reaches the control API as the daemon serves
// it: on the unix socket the control token names the peer's uid by its
// configured name, a principal's token file names that principal, and
// the log line of each request names it.
func TestControlPrincipalsWired(t *testing.T) {
	cfg := testConfig(t)
	uid := os.Getuid()
	aliceFile := filepath.Join(t.TempDir(), "alice.token")
	aliceTok := peerauth.NewSecret()
	if err := os.WriteFile(aliceFile, []byte(aliceTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Host.ControlPrincipals = config.ControlPrincipals{
		Tokens: []config.ControlToken{{Principal: "alice", File: aliceFile}},
		Peers:  []config.ControlPeer{{UID: &uid, Principal: "host-operator"}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 4)
	whoami := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := control.CallerFrom(r.Context())
		seen <- p.ID + " " + p.Method
	})
	l, handler, auth, err := listenControlAuth(cfg.Host, whoami, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := controlServer(handler)
	go srv.Serve(l)
	defer srv.Close()

	get := func(tokenFile string) int {
		t.Helper()
		c, base := ControlClient(cfg.Host.Control, ControlClientOptions{TokenFile: tokenFile})
		defer c.CloseIdleConnections()
		resp, err := c.Get(base + "/v1/whoami")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct{ file, want string }{
		{cfg.Host.ControlTokenFile, "host-operator peer"},
		{aliceFile, "alice token"},
	} {
		if code := get(tc.file); code != http.StatusOK {
			t.Fatalf("%s: %d", tc.want, code)
		}
		if got := <-seen; got != tc.want {
			t.Fatalf("the route saw %q, want %q", got, tc.want)
		}
	}

	// A reload swaps the principals in whole: bob's token now names bob,
	// alice's names no one; a reload that does not resolve changes
	// nothing.
	bobFile := filepath.Join(t.TempDir(), "bob.token")
	if err := os.WriteFile(bobFile, []byte(peerauth.NewSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := config.ControlPrincipals{Tokens: []config.ControlToken{{Principal: "bob", File: bobFile}}}
	if err := reloadControlPrincipals(auth, cfg.Host, next, nil); err != nil {
		t.Fatal(err)
	}
	if code := get(bobFile); code != http.StatusOK {
		t.Fatalf("bob after the reload: %d", code)
	}
	if got := <-seen; got != "bob token" {
		t.Fatalf("the route saw %q, want bob", got)
	}
	if code := get(aliceFile); code != http.StatusUnauthorized {
		t.Fatalf("alice after the reload: %d", code)
	}
	bad := config.ControlPrincipals{Peers: []config.ControlPeer{{User: "no-such-user-airlock-test", Principal: "x"}}}
	if err := reloadControlPrincipals(auth, cfg.Host, bad, nil); err == nil {
		t.Fatal("a reload naming no such user was applied")
	}
	if code := get(bobFile); code != http.StatusOK {
		t.Fatalf("bob after a refused reload: %d", code)
	}
	<-seen
}

// A host reload (SIGHUP) rereads host.control_principals and puts them in
// force at once; a file whose principals do not resolve keeps the
// running ones.
func TestHostReloadSwapsPrincipals(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "control.sock")
	aliceFile, bobFile := filepath.Join(dir, "alice.token"), filepath.Join(dir, "bob.token")
	for _, f := range []string{aliceFile, bobFile} {
		if err := os.WriteFile(f, []byte(peerauth.NewSecret()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "airlock.yaml")
	write := func(principals string) {
		t.Helper()
		body := "version: v1\nhost:\n  control: unix:" + sock + "\n  control_principals:\n" + principals
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("    tokens: [{principal: alice, file: " + aliceFile + "}]\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 4)
	l, handler, auth, err := listenControlAuth(cfg.Host, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := control.CallerFrom(r.Context())
		seen <- p.ID
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := controlServer(handler)
	go srv.Serve(l)
	defer srv.Close()
	h := host.New(host.Options{})
	defer h.Shutdown(context.Background())
	n := &hostNode{log: slog.New(slog.DiscardHandler), h: h, controlAuth: auth}
	status := func(tokenFile string) int {
		t.Helper()
		c, base := ControlClient(cfg.Host.Control, ControlClientOptions{TokenFile: tokenFile})
		defer c.CloseIdleConnections()
		resp, err := c.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			<-seen
		}
		return resp.StatusCode
	}
	if status(bobFile) != http.StatusUnauthorized || status(aliceFile) != http.StatusOK {
		t.Fatal("before the reload: alice, not bob")
	}
	write("    tokens: [{principal: bob, file: " + bobFile + "}]\n")
	cfg = n.reload(cfg)
	if status(bobFile) != http.StatusOK || status(aliceFile) != http.StatusUnauthorized {
		t.Fatal("after the reload: bob, not alice")
	}
	if len(cfg.Host.ControlPrincipals.Tokens) != 1 || cfg.Host.ControlPrincipals.Tokens[0].Principal != "bob" {
		t.Fatalf("the config in force: %+v", cfg.Host.ControlPrincipals)
	}
	write("    peers: [{user: no-such-user-airlock-test, principal: x}]\n")
	cfg = n.reload(cfg)
	if status(bobFile) != http.StatusOK {
		t.Fatal("a refused reload changed the principals")
	}
}

// The MCP endpoint's OAuth resource is host.mcp.resource_url, else the
// control API's own address when it is one: never guessed for all
// interfaces or a unix socket, and none without a JWT issuer.
func TestMCPResource(t *testing.T) {
	jwt := &config.ControlJWT{Issuer: "https://issuer.example", Audience: "airlock"}
	on := config.Host{MCP: config.HostMCP{Enabled: true}, ControlPrincipals: config.ControlPrincipals{JWT: jwt}}
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}
	for _, tc := range []struct {
		name string
		c    func(c *config.Host)
		addr net.Addr
		want string // "" none
		why  bool
	}{
		{"loopback", nil, loop, "http://127.0.0.1:7070/v1/mcp", false},
		{"ipv6 with tls", func(c *config.Host) { c.ControlTLS = &config.ControlTLS{} },
			&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443}, "https://[2001:db8::1]:443/v1/mcp", false},
		{"plain http off loopback", nil, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7070}, "", true},
		{"all interfaces", nil, &net.TCPAddr{IP: net.IPv4zero, Port: 7070}, "", true},
		{"unix socket", nil, &net.UnixAddr{Name: "control.sock", Net: "unix"}, "", true},
		{"configured", func(c *config.Host) { c.MCP.ResourceURL = "https://agents.example/v1/mcp" },
			&net.TCPAddr{IP: net.IPv4zero, Port: 7070}, "https://agents.example/v1/mcp", false},
		{"no jwt", func(c *config.Host) { c.ControlPrincipals.JWT = nil }, loop, "", false},
		{"mcp off", func(c *config.Host) { c.MCP.Enabled = false }, loop, "", false},
	} {
		c := on
		if tc.c != nil {
			tc.c(&c)
		}
		res, why := mcpResource(c, tc.addr)
		got := ""
		if res != nil {
			got = res.URL()
		}
		if got != tc.want || (why != nil) != tc.why {
			t.Errorf("%s: %q %v", tc.name, got, why)
		}
	}
}
