package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/host"
	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// A restart of airlock serve beside a running airlock host with a
// sandboxed plugin is visible where operators look: while serve is away
// the plugin's egress is "unavailable" in `airlock plugins`, the host's
// /readyz names the plugin, and airlock_plugin_egress_up is 0; once a new
// serve is up the host hands the plugin's listener over again and all
// three say ok.
func TestServeRestartShowsPluginEgress(t *testing.T) {
	dir := t.TempDir()
	cfg, serveAdmin, hostAdmin := serveHostConfig(t, dir, "")
	serve, _ := startServeProcess(t, nil, cfg, serveAdmin)

	installProvider(t, cfg, "")
	_, hostLogs := startHostProcess(t, cfg)
	ctl, base := daemon.ControlClient("unix:"+filepath.Join(dir, "state", "run", "control.sock"),
		daemon.ControlClientOptions{TokenFile: filepath.Join(dir, "state", "run", "control.token")})
	egress := func() string {
		resp, err := ctl.Get(base + "/v1/plugins")
		if err != nil {
			return "unreachable"
		}
		defer resp.Body.Close()
		var list struct{ Plugins []host.Status }
		_ = json.NewDecoder(resp.Body).Decode(&list)
		for _, p := range list.Plugins {
			if p.Name == "example.tickets" && p.State == host.StateRunning {
				return p.Egress
			}
		}
		return "not running"
	}
	waitEgress := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); egress() != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("egress %q, want %q\n%s", egress(), want, hostLogs.String())
			}
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + hostAdmin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitEgress("ok")
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Fatalf("host /readyz with serve up: %d %s", code, body)
	}

	// serve stops (a restart's first half): the cleanup of
	// startServeProcess sees it exited cleanly.
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitEgress("unavailable")
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"plugins":["example.tickets"]`) {
		t.Fatalf("host /readyz with serve away: %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, `airlock_plugin_egress_up{plugin="example.tickets"} 0`) {
		t.Fatalf("no egress-down series:\n%s", body)
	}
	out, _, code := cli(t, []string{"AIRLOCK_CONFIG=" + cfg}, "", "plugins")
	if code != 0 || !strings.Contains(out, "EGRESS") || !strings.Contains(out, "unavailable") {
		t.Fatalf("airlock plugins with serve away: %d\n%s", code, out)
	}

	startServeProcess(t, nil, cfg, serveAdmin) // and comes back
	waitEgress("ok")
	if _, body := get("/metrics"); !strings.Contains(body, `airlock_plugin_egress_up{plugin="example.tickets"} 1`) {
		t.Fatalf("no egress-up series:\n%s", body)
	}
}

// serveHostConfig writes the smallest config that runs airlock serve and
// airlock host side by side under dir (state, broker socket, free
// ports), with hostExtra added to its host section (indented lines).
func serveHostConfig(t *testing.T, dir, hostExtra string) (cfg, serveAdmin, hostAdmin string) {
	t.Helper()
	serveAdmin, hostAdmin = testenv.FreeAddr(t), testenv.FreeAddr(t)
	cfg = writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
broker:
  api: {socket: %q}
proxy:
  listen: %q
host:
  admin: %q
`, filepath.Join(dir, "state"), serveAdmin, filepath.Join(dir, "run", "broker.sock"), testenv.FreeAddr(t), hostAdmin)+hostExtra)
	return cfg, serveAdmin, hostAdmin
}
