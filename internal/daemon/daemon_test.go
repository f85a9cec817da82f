package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"

	"github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/evidence"
	"github.com/airlock-dev/airlock/host/executa"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
)

var providerBin, executaBin, notesBin, liarBin string

func TestMain(m *testing.M) {
	sandbox.Init() // plugins start through a re-executed test binary
	dir := testenv.Binaries("airlock-daemon-test-",
		testenv.Binary{Path: &providerBin, Pkg: "../../examples/tickets-provider"},
		testenv.Binary{Path: &executaBin, Pkg: "../../examples/executa-tickets"},
		testenv.Binary{Path: &notesBin, Pkg: "../../examples/notes", Name: "notes-provider"},
		testenv.Binary{Path: &liarBin, Pkg: "./testdata/notes-liar"})
	code := testenv.MainNoLeaks(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// testConfig is the embedded defaults on free ports under a temp state
// directory.
func testConfig(t *testing.T) *config.Config {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	cfg, err := config.Parse([]byte(fmt.Sprintf("version: v1\nadmin: {listen: %q}\nproxy: {listen: %q}\nhost: {admin: %q}\n",
		testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t))))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Room for plugins to start on a loaded machine (host.executa.timeouts).
	room := 2 * time.Minute
	cfg.Host.Executa.Timeouts = executa.Timeouts{Initialize: room, Describe: room, DescribeOnefile: room, Invoke: room, Health: room}
	return cfg
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// controlClient calls cfg's control API (by default a unix socket under
// the state directory) with its token, as airlock invoke does.
func controlClient(cfg *config.Config) (*http.Client, string) {
	c, base := ControlClient(cfg.Host.Control, ControlClientOptions{TokenFile: cfg.Host.ControlTokenFile})
	c.Timeout = 30 * time.Second
	return c, base
}

// Dev composes Serve and Host in one process: both demo plugins serve a
// credentialed call, /readyz covers the plugins, and everything it started
// is gone when its context ends.
func TestDevInProcess(t *testing.T) {
	leaks := testenv.CheckGoroutines(t)
	cfg := testConfig(t)
	// A plugin author's own plugin, from the config file's host.executa.
	py, err := exec.LookPath(testenv.Python())
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../../host/executa/testdata/compat/sdk_style.py")
	cfg.Host.Executa.Plugins = append(cfg.Host.Executa.Plugins, config.ExecutaPlugin{Name: "my-plugin", Command: py,
		Args: []string{script}, Credentials: map[string]string{"API_KEY": "tickets.placeholder"}, Settings: map[string]string{"UNITS": "kelvin"}})
	cfg.Host.CheckpointInterval = time.Second
	ready := make(chan Ready, 1)
	var out testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, cfg, DevOptions{Options: Options{Stdout: &out, OnReady: func(r Ready) { ready <- r }},
			Provider: providerBin, Executa: executaBin, Invoke: "airlock"})
	}()
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Dev: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("Dev not ready")
	}
	ctl, base := controlClient(cfg)
	if r.Control != cfg.Host.Control {
		t.Fatalf("Ready.Control = %q, want the config's %q", r.Control, cfg.Host.Control)
	}
	invoke := func(plugin, method, input string) control.Event {
		t.Helper()
		body, _ := json.Marshal(control.InvocationRequest{Plugin: plugin, Method: method, Input: json.RawMessage(input)})
		resp, err := ctl.Post(base+"/v1/invocations", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var ev control.Event
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &ev) != nil {
			t.Fatalf("%s %s: %d %s\n%s", plugin, method, resp.StatusCode, b, out.String())
		}
		return ev
	}
	if ev := invoke(DemoPlugin, "numinance.ports.tickets.v1.Tickets/ListTickets", `{"project":"demo"}`); ev.Status != "STATUS_SUCCEEDED" ||
		!strings.Contains(string(ev.Result), "DEMO-1") {
		t.Fatalf("provider call: %+v", ev)
	}
	upstream := strings.TrimSuffix(strings.SplitN(strings.SplitN(out.String(), "https://"+DemoHost+":", 2)[1], " ", 2)[0], "")
	if ev := invoke(DemoExecutaPlugin, "summarize", `{"base_url":"http://`+DemoHost+`:`+upstream+`"}`); ev.Status != "STATUS_SUCCEEDED" {
		t.Fatalf("executa call: %+v", ev)
	}
	// The command the banner prints for https://, through interception.
	httpsInput := `{"base_url":"https://` + DemoHost + `:` + upstream + `"}`
	if !strings.Contains(out.String(), "summarize '"+httpsInput+"'") {
		t.Fatalf("the banner offers no https:// call:\n%s", out.String())
	}
	if ev := invoke(DemoExecutaPlugin, "summarize", httpsInput); ev.Status != "STATUS_SUCCEEDED" {
		t.Fatalf("executa call over https://: %+v", ev)
	}
	if ev := invoke("my-plugin", "whoami", `{}`); ev.Status != "STATUS_SUCCEEDED" || !strings.Contains(string(ev.Result), `"units":"kelvin"`) ||
		!strings.Contains(string(ev.Result), `"key_is_handle":true`) {
		t.Fatalf("the author's own plugin under airlock dev: %+v", ev)
	}
	resp, err := client.Get("http://" + r.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %d", resp.StatusCode)
	}
	// A signed checkpoint of the evidence is served; after the stop the
	// log verifies against the host's key and holds that checkpoint.
	var jwks, head []byte
	for deadline := time.Now().Add(20 * time.Second); head == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint served")
		}
		head = getOK(t, ctl, base+"/v1/evidence/head")
	}
	jwks = getOK(t, ctl, base+"/v1/evidence/jwks.json")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Dev: %v", err)
	}
	keys, err := evidence.ParseJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	var cp evidence.Checkpoint
	if err := json.Unmarshal(head, &cp); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(cfg.StateDir, "dev", "evidence.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := evidence.VerifyWith(f, evidence.VerifyOptions{Keys: keys, Head: &cp})
	if err != nil || v.HeadAt == 0 || v.Unsigned != 0 {
		t.Fatalf("evidence after the stop: %+v %v", v, err)
	}
	if !strings.Contains(out.String(), "airlock dev stopped") || !strings.Contains(out.String(), "carried the demo secret") {
		t.Fatalf("output:\n%s", out.String())
	}
	leaks()
}

// Serve on embedded defaults is ready, serves its JWKS, and stops every
// goroutine it started.
func TestServeInProcess(t *testing.T) {
	leaks := testenv.CheckGoroutines(t)
	cfg := testConfig(t)
	ready := make(chan Ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{OnReady: func(r Ready) { ready <- r }}) }()
	var r Ready
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	for _, path := range []string{"/readyz", "/.well-known/jwks.json"} {
		resp, err := client.Get("http://" + r.Admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	leaks()
}

// A listener Serve cannot open is its own failure: an error, not a hang.
func TestServeListenerTaken(t *testing.T) {
	cfg := testConfig(t)
	l, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = Serve(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "admin listener") {
		t.Fatalf("Serve with the admin port taken: %v", err)
	}
}

// getOK returns the body of a 200 answer, nil otherwise.
func getOK(t *testing.T, c *http.Client, url string) []byte {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	return b
}

// /readyz covers Vault: not ready while it is sealed, ready again once it
// is unsealed, without a restart.
func TestServeReadinessFollowsVault(t *testing.T) {
	v := testenv.NewVault(t)
	t.Setenv("VAULT_TOKEN", v.RootToken)
	cfg := testConfig(t)
	cfg.Vault.Address = v.Addr
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := serveForTest(t, cfg)
	waitReadyz(t, r.Admin, http.StatusOK, "", "healthy Vault")
	v.Seal(t)
	waitReadyz(t, r.Admin, http.StatusServiceUnavailable, "vault", "sealed Vault")
	v.Unseal(t)
	waitReadyz(t, r.Admin, http.StatusOK, "", "unsealed Vault")
}
