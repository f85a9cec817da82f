package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/sandbox"

	"github.com/airlock-dev/airlock/internal/testenv"
)

var (
	airlockBin  string
	providerBin string
	executaBin  string
	// stateHome keeps the CLI's default state (keys, sockets) out of the
	// real home directory.
	stateHome string
)

func TestMain(m *testing.M) {
	sandbox.Init() // plugins start through a re-executed test binary
	dir := testenv.Binaries("airlock-cli-test-",
		testenv.Binary{Path: &airlockBin, Pkg: ".", Name: "airlock", Flags: []string{"-race"}},
		testenv.Binary{Path: &providerBin, Pkg: "../../examples/tickets-provider"},
		testenv.Binary{Path: &executaBin, Pkg: "../../examples/executa-tickets"})
	stateHome = filepath.Join(dir, "state")
	code := testenv.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs the airlock command in process with stdin and returns stdout,
// stderr and the exit code. env entries (K=V) are set for the test.
func cli(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	setEnv(t, append([]string{"XDG_STATE_HOME=" + stateHome}, env...))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb testenv.SyncBuffer
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

func setEnv(t *testing.T, env []string) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// writeConfig writes a config; unless it names the proxy, the proxy gets
// a free port so tests never collide with each other or a running airlock.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	if !strings.Contains(body, "\nproxy:") {
		body += fmt.Sprintf("proxy:\n  listen: %q\n", testenv.FreeAddr(t))
	}
	p := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startServe runs `airlock serve` in process until the test ends and
// waits for /readyz; it returns the server's log output.
func startServe(t *testing.T, env []string, cfgPath, admin string) *testenv.SyncBuffer {
	t.Helper()
	setEnv(t, append([]string{"XDG_STATE_HOME=" + t.TempDir()}, env...))
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testenv.SyncBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"serve", "--config", cfgPath}, nil, io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("serve did not stop cleanly: exit %d\n%s", code, logs.String())
			}
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop\n%s", logs.String())
		}
	})
	waitReady(t, admin, logs, func() (bool, string) {
		select {
		case code := <-exited:
			return true, fmt.Sprintf("exit %d", code)
		default:
			return false, ""
		}
	})
	return logs
}

// startServeProcess runs the airlock binary's serve, for the tests where a
// separate process is the point (signals, two processes).
func startServeProcess(t *testing.T, env []string, cfgPath, admin string) (*exec.Cmd, *testenv.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(airlockBin, "serve", "--config", cfgPath)
	cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()), env...)
	logs := &testenv.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("serve did not exit cleanly on SIGTERM: %v\n%s", err, logs.String())
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("serve ignored SIGTERM\n%s", logs.String())
		}
	})
	waitReady(t, admin, logs, func() (bool, string) {
		select {
		case err := <-exited:
			return true, fmt.Sprint(err)
		default:
			return false, ""
		}
	})
	return cmd, logs
}

// waitReady polls admin's /readyz until it answers 200.
func waitReady(t *testing.T, admin string, logs *testenv.SyncBuffer, exited func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if done, why := exited(); done {
			t.Fatalf("serve exited: %s\n%s", why, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("serve not ready\n%s", logs.String())
}

func jwksKids(t *testing.T, admin string) []string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	return kids
}

// The done-means of the foundation: serve's JWKS verifies a token that
// `token mint` made, through `token verify`.
func TestServeMintVerifyWithFileKeys(t *testing.T) {
	admin := testenv.FreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
admin: {listen: %q}
log: {format: json}
tokens:
  refresh: 1s
  keys: {source: file, path: %q}
`, admin, filepath.Join(t.TempDir(), "keys.pem")))
	startServe(t, nil, cfg, admin)

	tok, stderr, code := cli(t, nil, "", "token", "mint", "--config", cfg, "--kind", "sampling", "--user", "alice", "--invoke", "inv-1")
	if code != 0 {
		t.Fatalf("mint exit %d: %s", code, stderr)
	}
	out, stderr, code := cli(t, nil, tok, "token", "verify", "--config", cfg, "--kind", "sampling")
	if code != 0 {
		t.Fatalf("verify exit %d: %s", code, stderr)
	}
	var claims map[string]any
	if err := json.Unmarshal([]byte(out), &claims); err != nil {
		t.Fatalf("verify output is not JSON: %v\n%s", err, out)
	}
	if claims["user_id"] != "alice" || claims["tool_invoke_id"] != "inv-1" || claims["maxCallsPerInvoke"] != float64(8) {
		t.Fatalf("claims = %v", claims)
	}

	// Wrong audience and a tampered token fail with the reason, not the token.
	_, stderr, code = cli(t, nil, tok, "token", "verify", "--config", cfg, "--kind", "storage")
	if code != 1 || !strings.Contains(stderr, "token audience is wrong") {
		t.Fatalf("storage verify of a sampling token: exit %d, %s", code, stderr)
	}
	tampered := strings.TrimSpace(tok)
	tampered = tampered[:len(tampered)-4] + "AAAA"
	_, stderr, code = cli(t, nil, tampered, "token", "verify", "--config", cfg)
	if code != 1 || !strings.Contains(stderr, "token signature is invalid") || strings.Contains(stderr, tampered[:20]) {
		t.Fatalf("tampered: exit %d, %s", code, stderr)
	}

	// Rotation from the CLI shows up in the running server's JWKS (after
	// its refresh, or at once for an unknown kid) and the old key stays.
	before := jwksKids(t, admin)
	out, stderr, code = cli(t, nil, "", "token", "rotate", "--config", cfg)
	if code != 0 || !strings.Contains(out, "rotated: new kid") {
		t.Fatalf("rotate: exit %d %s %s", code, out, stderr)
	}
	// The server reloads its key file every tokens.refresh (1s here).
	var after []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if after = jwksKids(t, admin); len(after) == 2 {
			break
		}
	}
	if len(before) != 1 || len(after) != 2 {
		t.Fatalf("JWKS kids before=%v after=%v", before, after)
	}
	tok2, _, code := cli(t, nil, "", "token", "mint", "--config", cfg, "--kind", "storage")
	if code != 0 {
		t.Fatal("mint after rotate failed")
	}
	if _, stderr, code := cli(t, nil, tok2, "token", "verify", "--config", cfg, "--kind", "storage"); code != 0 {
		t.Fatalf("verify new-key token via serve: %s", stderr)
	}
	if _, stderr, code := cli(t, nil, tok, "token", "verify", "--config", cfg); code != 0 {
		t.Fatalf("old token after rotation: %s", stderr)
	}
}

func TestServeWithVaultKeys(t *testing.T) {
	v := testenv.Vault(t)
	admin := testenv.FreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
admin: {listen: %q}
vault: {address: %q}
tokens:
  keys: {source: vault, path: airlock/cli-test-keys}
`, admin, v.Addr))
	env := []string{"VAULT_TOKEN=" + v.RootToken}
	startServe(t, env, cfg, admin)
	tok, stderr, code := cli(t, env, "", "token", "mint", "--config", cfg, "--kind", "storage", "--app-id", "a1", "--app-slug", "notes")
	if code != 0 {
		t.Fatalf("mint: %s", stderr)
	}
	out, stderr, code := cli(t, nil, tok, "token", "verify", "--config", cfg, "--kind", "storage")
	if code != 0 || !strings.Contains(out, `"app_slug": "notes"`) {
		t.Fatalf("verify: exit %d %s %s", code, out, stderr)
	}
	if strings.Contains(stderr+out, v.RootToken) {
		t.Fatal("Vault token printed")
	}
}

func TestCheckConfig(t *testing.T) {
	good := writeConfig(t, "version: v1\n")
	if out, stderr, code := cli(t, nil, "", "check-config", good); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("good config: exit %d %s %s", code, out, stderr)
	}
	bad := writeConfig(t, "version: v1\ntokens:\n  ttl: 5h\n  algorithm: none\n  keys: {source: vault, path: x}\n")
	_, stderr, code := cli(t, nil, "", "check-config", "--config", bad)
	if code != 1 {
		t.Fatalf("bad config exit %d", code)
	}
	for _, want := range []string{"tokens.ttl", "tokens.algorithm", "vault needs the vault section"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("check-config output lacks %q:\n%s", want, stderr)
		}
	}
	_, stderr, code = cli(t, nil, "", "check-config", "--config", writeConfig(t, "version: v1\nbogus: 1\n"))
	if code != 1 || !strings.Contains(stderr, "line 2: field bogus not found") {
		t.Fatalf("unknown key: exit %d %s", code, stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"token"}, {"token", "mint", "--kind", "other"}, {"serve", "--nope"}} {
		_, _, code := cli(t, nil, "", args...)
		if code == 0 {
			t.Errorf("airlock %v exited 0", args)
		}
	}
	out, _, code := cli(t, nil, "", "version")
	if code != 0 || !strings.HasPrefix(out, "airlock ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

// Host-section mistakes are refused with the key that is wrong, before
// anything is installed or started.
func TestHostConfigErrors(t *testing.T) {
	state := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %q
host:
  executa:
    plugins:
      - {name: Bad Name, command: relative/bin}
`, state))
	_, stderr, code := cli(t, nil, "", "check-config", cfg)
	if code != 1 || !strings.Contains(stderr, "host.executa.plugins[0].name") || !strings.Contains(stderr, "host.executa.plugins[0].command: must be an absolute path") {
		t.Fatalf("check-config: %d %s", code, stderr)
	}

	cfg = writeConfig(t, fmt.Sprintf("version: v1\nstate_dir: %q\nhost: {artifacts: %q}\n", state, filepath.Join(state, "missing")))
	_, stderr, code = cli(t, nil, "", "host", "install", "--config", cfg, t.TempDir())
	if code == 0 || !strings.Contains(stderr, "host.artifacts:") || !strings.Contains(stderr, "is not a directory") {
		t.Fatalf("install with a missing artifacts dir: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(state, "plugins.lock.json")); !os.IsNotExist(err) {
		t.Fatalf("a refused install wrote the lockfile: %v", err)
	}
}

// check-config reports every problem at once: a bad destination names
// its intent and line and does not hide the next one; missing files are
// named; a secrets file others can read is refused.
func TestCheckConfigEveryProblem(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	os.WriteFile(secrets, []byte("x: {y: z}\n"), 0o644)
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
broker:
  secrets: {file: %q}
  intents:
    a.read:
      class: read
      secret: {source: file, path: x, field: y}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: ["https://127.1/x", {host: "0x7f.1"}]
    b.read:
      class: read
      secret: {source: file, path: x, field: y}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: [{host: "*.0.0.1"}]
proxy:
  upstream_ca_file: %q
host:
  policy: %q
  artifacts: %q
`, secrets, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "artifacts")))
	_, stderr, code := cli(t, nil, "", "check-config", cfg)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"broker.intents.a.read.destinations[0]: line 9:", "broker.intents.a.read.destinations[1]: line 9:",
		"broker.intents.b.read.destinations[0]: line 14:",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("check-config lacks %q:\n%s", want, stderr)
		}
	}
	// The file checks, alone.
	os.Chmod(secrets, 0o644)
	good := writeConfig(t, fmt.Sprintf("version: v1\nbroker: {secrets: {file: %q}}\nproxy: {upstream_ca_file: %q}\nhost: {policy: %q, artifacts: %q}\n",
		secrets, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "artifacts")))
	_, stderr, code = cli(t, nil, "", "check-config", good)
	for _, want := range []string{"broker.secrets.file: readable by others", "proxy.upstream_ca_file: the file does not exist",
		"host.policy:", "host.artifacts:"} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("check-config lacks %q (exit %d):\n%s", want, code, stderr)
		}
	}
}

// providerPackage is a package directory of the sample provider, its
// manifest's port 443 replaced by port and its name by name when set.
func providerPackage(t *testing.T, port, name string) string {
	t.Helper()
	pkg := t.TempDir()
	bin, _ := os.ReadFile(providerBin)
	os.WriteFile(filepath.Join(pkg, "provider"), bin, 0o755)
	b, _ := os.ReadFile("../../examples/tickets-provider/manifest.yaml")
	mf := string(b)
	if port != "" {
		mf = strings.ReplaceAll(mf, "port: 443", "port: "+port)
	}
	if name != "" {
		mf = strings.Replace(mf, "name: example.tickets", "name: "+name, 1)
	}
	os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte(mf), 0o600)
	return pkg
}

// installProvider installs the sample provider (providerPackage) with
// `airlock host install` while no host runs.
func installProvider(t *testing.T, cfg, port string) {
	t.Helper()
	out, stderr, code := cli(t, nil, "", "host", "install", "--config", cfg, providerPackage(t, port, ""))
	if code != 0 || !strings.Contains(out, "installed example.tickets: protocol v1") {
		t.Fatalf("install: %d %s %s", code, out, stderr)
	}
}

// startHostProcess runs `airlock host --config cfg` with its stderr in
// the returned buffer; the test's end stops it (SIGTERM) unless the test
// waited for it.
func startHostProcess(t *testing.T, cfg string) (*exec.Cmd, *testenv.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(airlockBin, "host", "--config", cfg)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	logs := &testenv.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	})
	return cmd, logs
}
