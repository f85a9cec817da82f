package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	hostcontrol "github.com/airlock-dev/airlock/host/control"
	"github.com/airlock-dev/airlock/host/pluginv1"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/tokens"

	"github.com/airlock-dev/airlock/internal/testenv"
)

// startServeAndHost runs Serve and Host on cfg until the test ends, as
// airlock serve and airlock host do (the host reaches the broker over its
// socket, with its token), and returns the host's control address.
func startServeAndHost(t *testing.T, cfg *config.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served, hosted := make(chan error, 1), make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		<-hosted
		<-served
	})
	serveReady, hostReady := make(chan Ready, 1), make(chan Ready, 1)
	go func() { served <- Serve(ctx, cfg, Options{OnReady: func(r Ready) { serveReady <- r }}) }()
	select {
	case <-serveReady:
	case err := <-served:
		hosted <- nil
		served <- err // for the cleanup, which waits for both
		t.Fatalf("Serve: %v", err)
	}
	go func() { hosted <- Host(ctx, cfg, Options{OnReady: func(r Ready) { hostReady <- r }}) }()
	select {
	case r := <-hostReady:
		return r.Control
	case err := <-hosted:
		hosted <- err
		t.Fatalf("Host: %v", err)
	}
	return ""
}

// providerPackage lays out the sample provider as an installable package.
func providerPackage(t *testing.T) string {
	t.Helper()
	pkg := t.TempDir()
	bin, err := os.ReadFile(providerBin)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := os.ReadFile("../../examples/tickets-provider/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "provider"), bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "manifest.yaml"), mf, 0o600); err != nil {
		t.Fatal(err)
	}
	return pkg
}

// curlInstall posts an install to the control API with curl (a real
// client in a process of its own), presenting token when it is not empty,
// and returns the status and body.
func curlInstall(t *testing.T, control, token, pkg string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(hostcontrol.InstallRequest{Dir: pkg})
	args := []string{"-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data-binary", "@-"}
	url := "http://" + control + "/v1/plugins"
	if p, ok := strings.CutPrefix(control, "unix:"); ok {
		args = append(args, "--unix-socket", p)
		url = "http://airlock/v1/plugins"
	}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	cmd := exec.Command("curl", append(args, url)...)
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(s, '\n')
	code := 0
	for _, c := range s[i+1:] {
		code = code*10 + int(c-'0')
	}
	return code, s[:max(i, 0)]
}

// Installing a plugin is an operator act: on the default unix socket and
// on a TCP listener with a token file, an install without the token or
// with a bit-flipped one is refused 401 naming host.control_token_file,
// and nothing is installed; with the token it is.
func TestControlAPIRefusesUnauthenticatedInstall(t *testing.T) {
	for _, tc := range []struct {
		name string
		tcp  bool
	}{{"unix socket", false}, {"tcp with token file", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			if tc.tcp {
				cfg.Host.Control = testenv.FreeAddr(t)
				cfg.Host.ControlTokenFile = filepath.Join(cfg.StateDir, "control-tcp.token")
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
			}
			control := startServeAndHost(t, cfg)
			st, err := os.Stat(cfg.Host.ControlTokenFile)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("control token file: %v %v, want mode 0600", st, err)
			}
			raw, _ := os.ReadFile(cfg.Host.ControlTokenFile)
			token := strings.TrimSpace(string(raw))
			flipped := []byte(token)
			flipped[len(flipped)/2] ^= 1
			pkg := providerPackage(t)
			for _, c := range []struct{ name, token, want string }{
				{"no token", "", "no token presented"},
				{"bit-flipped token", string(flipped), "not the one in host.control_token_file"},
			} {
				code, body := curlInstall(t, control, c.token, pkg)
				if code != http.StatusUnauthorized || !strings.Contains(body, `"error":"unauthenticated"`) ||
					!strings.Contains(body, c.want) || !strings.Contains(body, "host.control_token_file") || strings.Contains(body, token) {
					t.Fatalf("%s: %d %s", c.name, code, body)
				}
				lf, err := pluginv1.ReadLockfile(cfg.Host.Lockfile)
				if err != nil || len(lf.Plugins) != 0 {
					t.Fatalf("%s: the lockfile holds %v (%v)", c.name, lf.Plugins, err)
				}
				if _, err := os.Stat(filepath.Join(cfg.Host.PluginsDir, "example.tickets")); !os.IsNotExist(err) {
					t.Fatalf("%s: the package was copied in: %v", c.name, err)
				}
			}
			code, body := curlInstall(t, control, token, pkg)
			if code != http.StatusOK || !strings.Contains(body, `"name":"example.tickets"`) {
				t.Fatalf("install with the token: %d %s", code, body)
			}
		})
	}
}

// A peer whose uid the control socket does not allow is disconnected
// before a byte is read, token or not.
func TestControlSocketRefusesUID(t *testing.T) {
	cfg := testConfig(t)
	cfg.Host.ControlAllowedUIDs = []int{os.Getuid() + 1}
	l, handler, err := listenControl(cfg.Host, http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	c, base := controlClient(cfg)
	resp, err := c.Get(base + "/v1/plugins")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a peer of a uid not allowed got %s", resp.Status)
	}
}

// The host refuses to open a TCP control API that nothing authenticates,
// whatever skipped Validate.
func TestControlTCPWithoutAuthorityRefused(t *testing.T) {
	cfg := testConfig(t)
	cfg.Host.Control, cfg.Host.ControlTokenFile = testenv.FreeAddr(t), ""
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "host.control_token_file") {
		t.Fatalf("Validate: %v", err)
	}
	if l, _, err := listenControl(cfg.Host, http.NotFoundHandler(), nil); err == nil {
		l.Close()
		t.Fatal("listenControl opened an unauthenticated TCP control API")
	}
}

// Everything Airlock keeps in its state directory — signing keys, the
// intercept CA key, the evidence key and log, both tokens, the lockfile,
// installed plugins, APS storage, sockets — is its owner's alone (files
// 0600 or 0700, directories 0700), even under umask 0: modes are set, not
// left to the umask. The one exception is the intercept CA's certificate
// bundle, which is public.
func TestStateIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	cfg := testConfig(t)
	cfg.Tokens.Keys = tokens.KeysConfig{Source: tokens.SourceFile, Path: filepath.Join(cfg.StateDir, "signing-keys.pem")}
	cfg.Proxy.Intercept.CAFile = filepath.Join(cfg.StateDir, "intercept-ca.pem")
	cfg.Proxy.Intercept.CAKeyFile = filepath.Join(cfg.StateDir, "intercept-ca.key")
	cfg.Host.Executa.FilesListen = "127.0.0.1:0"
	cfg.Host.Executa.Plugins = []config.ExecutaPlugin{{Name: DemoExecutaPlugin, Command: executaBin}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	control := startServeAndHost(t, cfg)
	raw, _ := os.ReadFile(cfg.Host.ControlTokenFile)
	if code, body := curlInstall(t, control, strings.TrimSpace(string(raw)), providerPackage(t)); code != http.StatusOK {
		t.Fatalf("install: %d %s", code, body)
	}
	for _, p := range []string{cfg.Tokens.Keys.Path, cfg.Proxy.Intercept.CAKeyFile, cfg.Host.EvidenceKey, cfg.Host.Evidence,
		cfg.Broker.API.TokenFile, cfg.Host.ControlTokenFile, cfg.Host.Lockfile, cfg.Host.Executa.Storage} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("expected %s: %v", p, err)
		}
	}
	var checked int
	err := filepath.WalkDir(cfg.StateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		checked++
		perm := st.Mode().Perm()
		switch {
		case p == cfg.Proxy.Intercept.CAFile:
			// Public: the certificates plugins trust.
		case p == cfg.Host.PluginsDir:
			if perm != 0o711 {
				t.Errorf("the plugins directory has mode %#o, want 0711 (traversable, not listable)", perm)
			}
		case strings.HasPrefix(p, cfg.Host.PluginsDir+"/"):
			// A package is no secret: the uid a root host runs plugins as
			// must read it. Nobody but its owner may change it.
			if perm&0o022 != 0 {
				t.Errorf("%s has mode %#o: others may change it", p, perm)
			}
		case st.IsDir() && perm != 0o700:
			t.Errorf("directory %s has mode %#o, want 0700", p, perm)
		case !st.IsDir() && perm&0o077 != 0:
			t.Errorf("%s has mode %#o: its group or others may use it", p, perm)
		}
		return nil
	})
	if err != nil || checked < 10 {
		t.Fatalf("walked %d entries: %v", checked, err)
	}
}
