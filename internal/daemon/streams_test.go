package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/broker"
	brokerapi "github.com/airlock-dev/airlock/broker/api"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// airlock serve with a real Vault carries a Python gRPC call and a Python
// WebSocket through intercepted tunnels: each client is configured only
// by its environment (HTTPS_PROXY with the handle, the intercept CA
// file) and the secret read from Vault reaches the upstream as
// authorization, while its echo comes back redacted.
func TestServeGRPCAndWebSocket(t *testing.T) {
	ctx := context.Background()
	v := testenv.Vault(t)
	t.Setenv("VAULT_TOKEN", v.RootToken)
	const secret = "stream-secret-4711"
	if _, err := v.Client(t).KVv2("secret").Put(ctx, "airlock/streams", map[string]any{"token": secret}); err != nil {
		t.Fatal(err)
	}
	ca := testenv.NewCA(t)
	grpcPort := testenv.StartGRPCUpstream(t, ca.Issue(t, "api.streams.test"), secret)
	ws := testenv.StartWSUpstream(t, ca.Issue(t, "api.streams.test"), secret)
	state := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`version: v1
state_dir: %q
admin: {listen: %q}
vault: {address: %q}
broker:
  api: {socket: %q}
  intents:
    api:
      class: write
      secret: {source: vault, path: airlock/streams, field: token}
      inject: {header: {name: Authorization, template: "Bearer {{secret}}"}}
      destinations: [{host: api.streams.test, port: %d}, {host: api.streams.test, port: %d}]
proxy:
  listen: %q
  allow_cidrs: [127.0.0.0/8]
  upstream_ca_file: %q
  resolve: {api.streams.test: [127.0.0.1]}
  intercept: {ca_file: %q, ca_key_file: %q}
`, state, testenv.FreeAddr(t), v.Addr, filepath.Join(state, "run", "broker.sock"), grpcPort, ws.Port, testenv.FreeAddr(t), ca.PEMFile,
		filepath.Join(state, "intercept-ca.pem"), filepath.Join(state, "intercept-ca.key"))))
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	r := serveBackground(t, cfg)
	bc, err := brokerapi.Dial("unix://"+filepath.Join(state, "run", "broker.sock"), brokerapi.DialOptions{TokenFile: filepath.Join(state, "run", "broker.token")})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	iss, err := bc.Issue(ctx, broker.IssueRequest{PluginID: "p", InvocationID: "inv-streams", Intent: "api", Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(state, "intercept-ca.pem")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PYTHONDONTWRITEBYTECODE=1",
		"HTTPS_PROXY=http://" + iss.Handle + "@" + r.Proxy, "https_proxy=http://" + iss.Handle + "@" + r.Proxy,
		"SSL_CERT_FILE=" + caFile, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=" + caFile}

	lines := runPython(t, env, "AIRLOCK_TEST_GRPC_SCENARIO=all", "../../proxy/testdata/grpc_client.py", "api.streams.test:"+strconv.Itoa(grpcPort))
	for _, want := range []string{`"call": "unary", "code": 0, "message": "", "replies": ["unary:hi:true"]`, `"call": "bidi", "code": 0`,
		`"call": "fail", "code": 5, "message": "no such thing"`} {
		if !strings.Contains(lines, want) {
			t.Fatalf("grpcio through airlock serve: no %s in\n%s", want, lines)
		}
	}
	if strings.Contains(lines, secret) || !strings.Contains(lines, "[REDACTED]") {
		t.Fatalf("grpcio: the echoed secret was not redacted:\n%s", lines)
	}
	lines = runPython(t, env, "AIRLOCK_TEST_WS_SCENARIO=echo", "../../proxy/testdata/ws_client.py", "wss://api.streams.test:"+strconv.Itoa(ws.Port)+"/ws")
	if !strings.Contains(lines, `"got": "echo:hello"`) || !strings.Contains(lines, `"close_code": 1000`) ||
		strings.Contains(lines, secret) || !strings.Contains(lines, "[REDACTED]") {
		t.Fatalf("websockets through airlock serve:\n%s", lines)
	}
	if got := ws.LastAuth(t); got != "Bearer "+secret {
		t.Fatalf("the WebSocket upstream saw Authorization %q", got)
	}
}

// serveBackground runs Serve with cfg until the test ends, and returns
// once it is ready.
func serveBackground(t *testing.T, cfg *config.Config) Ready {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Ready, 1)
	exited := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = Serve(ctx, cfg, Options{OnReady: func(r Ready) { ready <- r }})
		close(exited)
	}()
	t.Cleanup(func() { cancel(); <-exited })
	select {
	case r := <-ready:
		return r
	case <-exited:
		t.Fatalf("Serve: %v", serveErr)
		return Ready{}
	}
}

// runPython runs a client script and returns its output, one JSON
// object a line.
func runPython(t *testing.T, env []string, scenario, script, target string) string {
	t.Helper()
	cmd := exec.Command(testenv.Python(), script, target)
	cmd.Env = append(append([]string(nil), env...), scenario)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var v map[string]any
		if json.Unmarshal(sc.Bytes(), &v) != nil {
			t.Fatalf("%s: not JSON: %q", script, sc.Text())
		}
	}
	return string(out)
}
