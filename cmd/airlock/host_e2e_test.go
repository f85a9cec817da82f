package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-dev/airlock/internal/daemon"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlock serve and airlock host as separate processes, secrets in a real
// Vault, handles in a real Redis: install, invoke, a credentialed upstream
// call, evidence that verifies; then the provider dies mid-invoke.
func TestServeAndHostEndToEnd(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	if _, err := v.Client(t).KVv2("secret").Put(ctx, "airlock/tickets", map[string]any{"token": "vault-tickets-secret-42"}); err != nil {
		t.Fatal(err)
	}
	rd := testenv.Redis(t)
	ca := testenv.NewCA(t)
	var slowPost atomic.Bool
	hold := make(chan struct{})
	gotAuth := make(chan string, 16)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth <- r.Header.Get("Authorization")
		if r.Method == http.MethodPost {
			if slowPost.Load() {
				select {
				case <-hold:
				case <-r.Context().Done():
					return
				}
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"id": "T-9"})
			return
		}
		json.NewEncoder(w).Encode([]map[string]string{{"id": "T-1", "title": "from vault-backed call"}})
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "tickets.demo.airlock.test")}}
	up.StartTLS()
	defer func() { close(hold); up.Close() }() // release a held handler before Close waits for it
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())

	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policy, []byte("version: v1\ndefault: allow\n"), 0o600)
	admin := testenv.FreeAddr(t)
	fixture := filepath.Join(dir, "sampling.jsonl")
	os.WriteFile(fixture, []byte(`{"match":"","text":"one open ticket","model":"e2e-fixture","inputTokens":9,"outputTokens":3}`+"\n"), 0o600)
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
vault: {address: %q}
broker:
  api: {socket: %q}
  store: {type: redis, redis: {address: %q}}
  intents:
    tickets.read:
      class: read
      secret: {source: vault, path: airlock/tickets, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
    tickets.write:
      class: write
      secret: {source: vault, path: airlock/tickets, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
    tickets.placeholder:
      class: read
      secret: {source: vault, path: airlock/tickets, field: token}
      inject: {placeholder: {headers: [Authorization]}}
      destinations: [{host: tickets.demo.airlock.test, port: %s, path_prefix: /api/, methods: [GET]}]
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {tickets.demo.airlock.test: [127.0.0.1]}
host:
  admin: 127.0.0.1:0
  checkpoint_interval: 1s
  policy: %q
  executa:
    sampling: {fixture: %q}
    plugins:
      - name: executa-tickets
        command: %q
        strict: true
        credentials: {TICKETS_API_KEY: tickets.placeholder}
`, filepath.Join(dir, "state"), admin, v.Addr, filepath.Join(dir, "run", "broker.sock"), rd.Addr, upPort, testenv.FreeAddr(t), ca.PEMFile,
		policy, fixture, executaBin))
	// The control API is the default: a unix socket under the state
	// directory, and the token beside it; the CLI finds both through the
	// config.
	ctl, base := daemon.ControlClient("unix:"+filepath.Join(dir, "state", "run", "control.sock"),
		daemon.ControlClientOptions{TokenFile: filepath.Join(dir, "state", "run", "control.token")})
	withConfig := []string{"AIRLOCK_CONFIG=" + cfg}
	env := []string{"VAULT_TOKEN=" + v.RootToken}
	startServeProcess(t, env, cfg, admin)

	installProvider(t, cfg, upPort)
	hostCmd, hostLogs := startHostProcess(t, cfg)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := ctl.Get(base + "/v1/plugins"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /v1/plugins with the token: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host not up:\n%s", hostLogs.String())
		}
	}
	invoke := func(method, input string) (string, string, int) {
		return cli(t, withConfig, "", "invoke", "example.tickets",
			"numinance.ports.tickets.v1.Tickets/"+method, input)
	}
	res, stderr, code := invoke("ListTickets", `{"project":"core"}`)
	if code != 0 || !strings.Contains(res, "from vault-backed call") {
		t.Fatalf("invoke: %d %s %s\n%s", code, res, stderr, hostLogs.String())
	}
	if a := <-gotAuth; a != "Bearer vault-tickets-secret-42" {
		t.Fatalf("upstream saw %q", a)
	}

	// Kill the provider while its credentialed POST is at the upstream.
	slowPost.Store(true)
	done := make(chan string, 1)
	go func() { o, e, _ := invoke("CreateTicket", `{"project":"core","title":"t"}`); done <- o + e }()
	select {
	case <-gotAuth:
	case <-time.After(20 * time.Second):
		t.Fatal("the POST never reached the upstream")
	}
	if out, err := exec.Command("pkill", "-KILL", "-f", filepath.Join(dir, "state", "plugins", "example.tickets", "v-[^/]*", "provider")).CombinedOutput(); err != nil {
		t.Fatalf("pkill: %v %s", err, out)
	}
	if got := <-done; !strings.Contains(got, "FAILED") {
		t.Fatalf("invocation after the provider died: %s", got)
	}
	// Every handle in the shared store is revoked.
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr})
	defer rdb.Close()
	keys, _ := rdb.Keys(ctx, "airlock:h:*").Result()
	if len(keys) < 2 {
		t.Fatalf("handles in Redis: %v", keys)
	}
	for _, k := range keys {
		if r, _ := rdb.HGet(ctx, k, "r").Result(); r != "1" {
			t.Fatalf("handle %s not revoked after the provider died", k)
		}
	}
	// The supervisor brings the provider back.
	slowPost.Store(false)
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		res, _, code := invoke("ListTickets", `{}`)
		last = res
		if code == 0 {
			last = ""
			break
		}
	}
	if last != "" {
		t.Fatalf("provider not restarted: %s\n%s", last, hostLogs.String())
	}

	// The Executa plugin in the same host: its handle is swapped for the
	// Vault secret at the proxy; its sampling and storage tokens are minted
	// by airlock serve over the broker API and verified here through JWKS.
	for len(gotAuth) > 0 {
		<-gotAuth
	}
	res, stderr, code = cli(t, withConfig, "", "invoke", "executa-tickets", "summarize",
		fmt.Sprintf(`{"base_url":"http://tickets.demo.airlock.test:%s"}`, upPort))
	if code != 0 || !strings.Contains(res, "SUCCEEDED") || !strings.Contains(res, "e2e-fixture") || !strings.Contains(res, "user/last_summary") {
		t.Fatalf("executa invoke: %d\n%s\n%s\n%s", code, res, stderr, hostLogs.String())
	}
	if a := <-gotAuth; a != "Bearer vault-tickets-secret-42" {
		t.Fatalf("upstream saw %q from the Executa plugin", a)
	}
	if strings.Contains(hostLogs.String(), "vault-tickets-secret-42") {
		t.Fatal("the secret reached the host's logs")
	}
	// airlock plugins lists both kinds, with the provider's restart.
	list, stderr, code := cli(t, withConfig, "", "plugins")
	if code != 0 || !regexp.MustCompile(`example\.tickets\s+plugin/v1\s+running\s+1\s+\d+\s+(namespaces|landlock)\s+1\s+ok`).MatchString(list) ||
		!regexp.MustCompile(`executa-tickets\s+executa\s+running\s+2\.0`).MatchString(list) {
		t.Fatalf("airlock plugins: %d\n%s%s", code, list, stderr)
	}

	// Installing while the host runs goes through it (the host is the
	// evidence log's only writer): the plugin starts at once, no fork.
	out, stderr, code := cli(t, nil, "", "host", "install", "--config", cfg, providerPackage(t, upPort, "example.tickets2"))
	if code != 0 || !strings.Contains(out, "through the running airlock host: example.tickets2 is running") {
		t.Fatalf("install while the host runs: %d %s %s", code, out, stderr)
	}
	if res, stderr, code := cli(t, withConfig, "", "invoke", "example.tickets2",
		"numinance.ports.tickets.v1.Tickets/ListTickets", `{}`); code != 0 {
		t.Fatalf("the hot-installed plugin: %s %s", res, stderr)
	}
	for len(gotAuth) > 0 {
		<-gotAuth
	}
	// The host's checkpoint key and its latest checkpoint, as an auditor
	// would save them.
	jwksFile, headFile := filepath.Join(dir, "evidence-jwks.json"), filepath.Join(dir, "head.json")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := ctl.Get(base + "/v1/evidence/head")
		if err == nil && resp.StatusCode == http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			os.WriteFile(headFile, b, 0o600)
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("no evidence checkpoint served")
		}
	}
	if resp, err := ctl.Get(base + "/v1/evidence/jwks.json"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		os.WriteFile(jwksFile, b, 0o600)
	}

	// SIGTERM with a call in flight: the call ends FAILED "host shutting
	// down" and the host exits 0.
	slowPost.Store(true)
	go func() { o, e, _ := invoke("CreateTicket", `{"project":"core","title":"t"}`); done <- o + e }()
	select {
	case <-gotAuth:
	case <-time.After(20 * time.Second):
		t.Fatal("the POST never reached the upstream")
	}
	if err := hostCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !strings.Contains(got, "FAILED") || !strings.Contains(got, "reason: host shutting down") {
		t.Fatalf("the call in flight at SIGTERM: %s", got)
	}
	if err := hostCmd.Wait(); err != nil {
		t.Fatalf("airlock host after SIGTERM: %v\n%s", err, hostLogs.String())
	}

	evidence := filepath.Join(dir, "state", "evidence.jsonl")
	verify, stderr, code := cli(t, nil, "", "evidence", "verify", "--jwks", jwksFile, "--head", headFile, evidence)
	// The checkpoint at shutdown signs every record: no unsigned tail.
	if code != 0 || !strings.Contains(verify, "signatures checked") || !strings.Contains(verify, "saved head: covers records 1-") ||
		strings.Contains(verify, "WARNING") {
		t.Fatalf("evidence: %s %s", verify, stderr)
	}
	b, _ := os.ReadFile(evidence)
	for _, want := range []string{"lifecycle.crash", "credential.issued", "invocation.outcome", `"reason":"host shutting down"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("evidence lacks %s", want)
		}
	}
}
