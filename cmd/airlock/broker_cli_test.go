package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/testenv"
)

func TestCheckConfigVault(t *testing.T) {
	v := testenv.Vault(t)
	if _, err := v.Client(t).KVv2("secret").Put(context.Background(), "cli/github", map[string]any{"token": "ghp-secret-value"}); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
vault: {address: %q}
broker:
  intents:
    github.read:
      class: read
      secret: {source: vault, path: cli/github, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: [https://api.github.com/]
    github.broken:
      class: write
      secret: {source: vault, path: cli/github, field: missing_field}
      inject: {query: {name: access_token}}
`, v.Addr))
	env := []string{"VAULT_TOKEN=" + v.RootToken}
	out, stderr, code := cli(t, env, "", "check-config", "--vault", cfg)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (one intent broken)\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"intent github.read: readable (vault, version 1)",
		`intent github.broken: FAILED: intent "github.broken": secret lacks the bound field`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, "ghp-secret-value") || strings.Contains(out+stderr, v.RootToken) {
		t.Fatal("check-config printed a secret")
	}
}

func TestSecretsRefreshEndpoint(t *testing.T) {
	admin := testenv.FreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("version: v1\nadmin: {listen: %q}\n", admin))
	startServe(t, nil, cfg, admin)
	post := func() int {
		resp, err := http.Post("http://"+admin+"/v1/secrets/refresh", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(); c != http.StatusOK {
		t.Fatalf("refresh = %d", c)
	}
	if c := post(); c != http.StatusTooManyRequests {
		t.Fatalf("second refresh within a second = %d, want 429", c)
	}
	resp, err := http.Get("http://" + admin + "/v1/secrets/refresh")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET refresh = %d, want 405", resp.StatusCode)
	}
}

// airlock serve exposes the broker API on its unix socket; a host in
// another process issues and revokes through it.
func TestServeBrokerAPI(t *testing.T) {
	admin := testenv.FreeAddr(t)
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/api: {token: demo-secret}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "broker.sock")
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
admin: {listen: %q}
broker:
  egress_proxy: 127.0.0.1:8899
  api: {socket: %q}
  secrets: {file: %q}
  intents:
    demo.read:
      class: read
      secret: {source: file, path: demo/api, field: token}
      inject: {placeholder: {}}
`, admin, sock, secrets))
	startServe(t, nil, cfg, admin)
	c, err := brokerapi.Dial("unix://"+sock, brokerapi.DialOptions{TokenFile: filepath.Join(filepath.Dir(sock), broker.DefaultTokenFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	iss, err := c.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv-1", Intent: "demo.read",
		Destinations: []broker.Destination{{Host: "api.example.com"}}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatalf("Issue through airlock serve: %v", err)
	}
	if !strings.HasPrefix(iss.Handle, broker.HandlePrefix) || iss.EgressProxy != "127.0.0.1:8899" {
		t.Fatalf("issued %+v", iss)
	}
	if n, err := c.RevokeInvocation(ctx, "inv-1"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.GetStoreType() != "memory" || !st.GetStoreOk() || st.GetIntents()[0] != "demo.read" {
		t.Fatalf("status %v %v", st, err)
	}
}

// airlock serve runs the egress proxy from config: a handle issued through
// the broker API takes curl, configured only by http_proxy, to a TLS
// upstream that sees the secret while curl does not.
func TestServeProxyEndToEnd(t *testing.T) {
	ca := testenv.NewCA(t)
	var seenAuth atomic.Value
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenAuth.Store(r.Header.Get("Authorization"))
		fmt.Fprintf(w, "you sent %s", r.Header.Get("Authorization"))
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "demo.airlock.test")}}
	up.StartTLS()
	defer up.Close()
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())

	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/api: {token: demo-secret-123456}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin, proxyAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	sock := filepath.Join(dir, "run", "broker.sock")
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
admin: {listen: %q}
broker:
  api: {socket: %q}
  secrets: {file: %q}
  intents:
    demo:
      class: read
      secret: {source: file, path: demo/api, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {demo.airlock.test: [127.0.0.1]}
`, admin, sock, secrets, proxyAddr, ca.PEMFile))
	startServe(t, nil, cfg, admin)
	c, err := brokerapi.Dial("unix://"+sock, brokerapi.DialOptions{TokenFile: filepath.Join(filepath.Dir(sock), broker.DefaultTokenFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port, _ := strconv.Atoi(upPort)
	iss, err := c.Issue(context.Background(), broker.IssueRequest{PluginID: "p", InvocationID: "inv-e2e", Intent: "demo",
		Destinations: []broker.Destination{{Host: "demo.airlock.test", Port: port}}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if iss.EgressProxy != proxyAddr {
		t.Fatalf("egress_proxy = %q, want the proxy's listen address %q", iss.EgressProxy, proxyAddr)
	}
	curl := exec.Command("curl", "-sS", "--max-time", "10", "http://demo.airlock.test:"+upPort+"/hello")
	curl.Env = []string{"PATH=" + os.Getenv("PATH"), "http_proxy=http://" + iss.Handle + "@" + iss.EgressProxy}
	out, err := curl.CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if seenAuth.Load() != "Bearer demo-secret-123456" {
		t.Fatalf("upstream saw %v", seenAuth.Load())
	}
	if strings.Contains(string(out), "demo-secret-123456") || !strings.Contains(string(out), "[REDACTED]") {
		t.Fatalf("curl saw %q", out)
	}
	if _, err := c.RevokeInvocation(context.Background(), "inv-e2e"); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
		"-x", "http://"+iss.Handle+"@"+iss.EgressProxy, "http://demo.airlock.test:"+upPort+"/hello").CombinedOutput()
	if string(out) != "403" {
		t.Fatalf("after revocation curl got %q, want 403", out)
	}
}

// SIGHUP makes the running server drop its cached secrets (Vault admins
// rotate, then signal).
func TestServeSIGHUPRefreshesSecrets(t *testing.T) {
	admin := testenv.FreeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("version: v1\nadmin: {listen: %q}\n", admin))
	cmd, logs := startServeProcess(t, nil, cfg, admin)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "secret cache invalidated"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no refresh after SIGHUP:\n%s", logs.String())
		}
	}
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("server unhealthy after SIGHUP: %v", err)
	}
	resp.Body.Close()
}
