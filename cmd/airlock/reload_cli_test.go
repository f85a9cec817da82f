package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// waitLog waits until logs holds want past offset from; it returns the
// offset after the match.
func waitLog(t *testing.T, logs *testenv.SyncBuffer, from int, want string) int {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s := logs.String()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, s[from:])
		}
	}
}

// hangUp sends SIGHUP to a running airlock and checks it is still there.
func hangUp(t *testing.T, p *os.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP: %v", err)
	}
}

// SIGHUP reloads serve's intents and rates from the edited file, at once
// and without a restart; a file that does not validate changes nothing,
// and the log names the problem, not the value.
func TestServeSIGHUPReloadsIntentsAndLimits(t *testing.T) {
	ca := testenv.NewCA(t)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "upstream saw ", r.Header.Get("X-Key"))
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "demo.airlock.test")}}
	up.StartTLS()
	defer up.Close()
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())
	port, _ := strconv.Atoi(upPort)

	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/api: {token: demo-secret-1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin, proxyAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	sock := filepath.Join(dir, "run", "broker.sock")
	config := func(intents, limits string) string {
		return fmt.Sprintf(`version: v1
admin: {listen: %q}
broker:
  api: {socket: %q}
  secrets: {file: %q}
  intents:
%s
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {demo.airlock.test: [127.0.0.1]}
  limits: {%s}
`, admin, sock, secrets, intents, proxyAddr, ca.PEMFile, limits)
	}
	const demo = `    demo:
      class: read
      secret: {source: file, path: demo/api, field: token}
      inject: {header: {name: X-Key, template: "{{secret}}"}}`
	const added = `
    added:
      class: read
      secret: {source: file, path: demo/api, field: token}
      inject: {header: {name: X-Key, template: "added-{{secret}}"}}`
	// Rates so low that nothing refills during the test.
	cfg := writeConfig(t, config(demo, "per_handle_rps: 0.001, per_handle_burst: 1"))
	cmd, logs := startServeProcess(t, nil, cfg, admin)

	c, err := brokerapi.Dial("unix://"+sock, brokerapi.DialOptions{TokenFile: filepath.Join(filepath.Dir(sock), broker.DefaultTokenFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inv := 0
	issue := func(intent string) (string, error) {
		inv++
		iss, err := c.Issue(context.Background(), broker.IssueRequest{PluginID: "p", InvocationID: "inv-" + strconv.Itoa(inv), Intent: intent,
			Destinations: []broker.Destination{{Host: "demo.airlock.test", Port: port}}, Deadline: time.Now().Add(time.Minute)})
		return iss.Handle, err
	}
	get := func(handle string) (int, string) {
		t.Helper()
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", User: url.User(handle), Host: proxyAddr})}}
		resp, err := hc.Get("http://demo.airlock.test:" + upPort + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, err := issue("added"); err == nil {
		t.Fatal("an intent the file does not have yet was issued")
	}
	h, err := issue("demo")
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(h); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	if code, _ := get(h); code != http.StatusTooManyRequests {
		t.Fatalf("second request under burst 1: %d, want 429", code)
	}

	// The edit: an intent added, the burst raised.
	if err := os.WriteFile(cfg, []byte(config(demo+added, "per_handle_rps: 0.001, per_handle_burst: 2")), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(t, cmd.Process)
	at := waitLog(t, logs, 0, "config reloaded")
	for _, want := range []string{"broker.intents.added", "proxy.limits.per_handle_burst"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the reload does not say it applied %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "restart_needed") {
		t.Fatalf("an edit of intents and rates only asks for a restart:\n%s", logs.String())
	}
	h2, err := issue("added")
	if err != nil {
		t.Fatalf("the added intent after SIGHUP: %v", err)
	}
	for i := range 2 {
		if code, body := get(h2); code != http.StatusOK || !strings.HasPrefix(body, "upstream saw added-") {
			t.Fatalf("request %d with the added intent under burst 2: %d %q", i+1, code, body)
		}
	}
	if code, _ := get(h2); code != http.StatusTooManyRequests {
		t.Fatalf("third request under burst 2: %d, want 429", code)
	}

	// A bad edit: the running config stays, the log says why without the
	// value.
	const bad = "NOT-A-CLASS-7f3a"
	if err := os.WriteFile(cfg, []byte(config(strings.Replace(demo, "class: read", "class: "+bad, 1), "per_handle_burst: 5")), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(t, cmd.Process)
	waitLog(t, logs, at, "config reload refused")
	if !strings.Contains(logs.String()[at:], "broker.intents.demo.class") {
		t.Fatalf("the refusal does not name the setting:\n%s", logs.String()[at:])
	}
	if strings.Contains(logs.String(), bad) {
		t.Fatalf("the refusal quotes the value:\n%s", logs.String()[at:])
	}
	if _, err := issue("added"); err != nil {
		t.Fatalf("the running config did not stay after a bad file: %v", err)
	}

	// A setting a reload cannot apply is named, and the rest applies.
	if err := os.WriteFile(cfg, []byte(config(demo, "per_handle_rps: 0.001, per_handle_burst: 2, max_request_body: 4096")), 0o600); err != nil {
		t.Fatal(err)
	}
	at = len(logs.String())
	hangUp(t, cmd.Process)
	waitLog(t, logs, at, "restart_needed")
	if !strings.Contains(logs.String()[at:], "proxy.limits.max_request_body") {
		t.Fatalf("the restart warning does not name the setting:\n%s", logs.String()[at:])
	}
	if _, err := issue("added"); err == nil {
		t.Fatal("the intent removed by the same edit is still issued")
	}
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("serve after SIGHUPs: %v", err)
	}
	resp.Body.Close()
}

// SIGHUP never ends airlock host: it rereads host.policy and the call it
// denied goes through; a policy that does not parse changes nothing, and
// the log names the problem, not the value.
func TestHostSIGHUPReloadsPolicy(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("demo/api: {token: demo-secret-1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("version: v1\ndefault: deny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	evLog := filepath.Join(dir, "evidence.jsonl")
	admin := testenv.FreeAddr(t)
	fixture := filepath.Join(dir, "sampling.jsonl")
	if err := os.WriteFile(fixture, []byte(`{"match":"","text":"t","model":"reload-fixture","inputTokens":1,"outputTokens":1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
broker:
  api: {socket: %q}
  secrets: {file: %q}
  intents:
    tickets.placeholder:
      class: read
      secret: {source: file, path: demo/api, field: token}
      inject: {placeholder: {headers: [Authorization]}}
      destinations: [{host: tickets.demo.airlock.test, port: 443, path_prefix: /api/, methods: [GET]}]
host:
  admin: %q
  policy: %q
  evidence: %q
  executa:
    sampling: {fixture: %q}
    plugins:
      - name: executa-tickets
        command: %q
        credentials: {TICKETS_API_KEY: tickets.placeholder}
`, filepath.Join(dir, "state"), admin, filepath.Join(dir, "run", "broker.sock"), secrets, testenv.FreeAddr(t), policy, evLog, fixture, executaBin))
	startServeProcess(t, nil, cfg, admin)

	hostCmd := exec.Command(airlockBin, "host", "--config", cfg)
	hostCmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	logs := &testenv.SyncBuffer{}
	hostCmd.Stderr = logs
	if err := hostCmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- hostCmd.Wait() }()
	defer func() {
		_ = hostCmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = hostCmd.Process.Kill()
			t.Errorf("host ignored SIGTERM\n%s", logs.String())
		}
	}()
	alive := func() {
		t.Helper()
		select {
		case err := <-exited:
			t.Fatalf("airlock host exited after SIGHUP: %v\n%s", err, logs.String())
		default:
		}
	}
	waitLog(t, logs, 0, "airlock host running")
	invoke := func() string {
		out, stderr, _ := cli(t, []string{"AIRLOCK_CONFIG=" + cfg}, "", "invoke", "executa-tickets", "summarize",
			`{"base_url":"http://tickets.demo.airlock.test"}`)
		return out + stderr
	}
	if res := invoke(); !strings.Contains(res, "policy_denied") {
		t.Fatalf("a call under default: deny: %s", res)
	}

	if err := os.WriteFile(policy, []byte("version: v1\ndefault: allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// logrotate renames the evidence log, then reloads: the host starts
	// the new file at once, not only at its next record.
	if err := os.Rename(evLog, evLog+".1"); err != nil {
		t.Fatal(err)
	}
	hangUp(t, hostCmd.Process)
	at := waitLog(t, logs, 0, "host policy reloaded")
	alive()
	waitLog(t, logs, at, `"digest":"sha256:`)
	if _, err := os.Stat(evLog); err != nil {
		t.Fatalf("SIGHUP did not start a new evidence file after the rename: %v\n%s", err, logs.String())
	}
	if res := invoke(); strings.Contains(res, "policy_denied") {
		t.Fatalf("a call after the policy allows it and SIGHUP: %s\n%s", res, logs.String())
	}

	const bad = "maybe-7f3a"
	if err := os.WriteFile(policy, []byte("version: v1\ndefault: "+bad+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(t, hostCmd.Process)
	waitLog(t, logs, at, "policy reload refused")
	alive()
	if !strings.Contains(logs.String()[at:], "policy.default") || strings.Contains(logs.String(), bad) {
		t.Fatalf("the refusal should name policy.default and not quote the value:\n%s", logs.String()[at:])
	}
	if res := invoke(); strings.Contains(res, "policy_denied") {
		t.Fatalf("the running policy did not stay after a bad file: %s", res)
	}

	// A rule whose CEL does not type-check is refused the same way: the
	// log names the rule and CEL's reason, and the running policy stays.
	at = waitLog(t, logs, at, "policy reload refused")
	if err := os.WriteFile(policy, []byte("version: v1\ndefault: deny\nrules: [{name: typo, effect: allow, when: 'principal.idd != \"\"'}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(t, hostCmd.Process)
	waitLog(t, logs, at, "policy reload refused")
	alive()
	if refusal := logs.String()[at:]; !strings.Contains(refusal, "policy.rules[0] (typo).when") || !strings.Contains(refusal, "undefined field 'idd'") {
		t.Fatalf("the refusal should name the rule and CEL's reason:\n%s", logs.String()[at:])
	}
	if res := invoke(); strings.Contains(res, "policy_denied") {
		t.Fatalf("the running policy did not stay after a rule that does not compile: %s", res)
	}
	if out, stderr, code := cli(t, nil, "", "evidence", "verify", evLog+".1", evLog); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("the rotated evidence log does not verify as one chain: exit %d\n%s%s", code, out, stderr)
	}
}
